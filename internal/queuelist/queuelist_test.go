package queuelist

import (
	"context"
	"strings"
	"testing"
)

// The management URL's errors show the address without its password,
// whether or not it parses. Redact returned a URL that did not parse as it
// was, password and all.
func TestErrorsNeverShowThePassword(t *testing.T) {
	for _, raw := range []string{"amqp://user:pa ss@host", "amqp://user:p%zz@host"} {
		_, err := ManagementURL(raw)
		if err == nil || strings.Contains(err.Error(), "pa ss") || strings.Contains(err.Error(), "p%zz") {
			t.Errorf("ManagementURL(%q): %v", raw, err)
		}
	}
	for _, mgmt := range []string{"http://user:pa ss@host:15672/", "http://user:p%zz@host:15672/"} {
		_, err := List(context.Background(), "amqp://h/", mgmt)
		if err == nil || strings.Contains(err.Error(), "pa ss") || strings.Contains(err.Error(), "p%zz") {
			t.Errorf("List with management URL %q: %v", mgmt, err)
		}
	}
}
