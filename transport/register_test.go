package transport

import (
	"context"
	"strings"
	"testing"
)

type nopDriver struct{}

func (nopDriver) Name() string           { return "nop" }
func (nopDriver) Capabilities() []string { return nil }
func (nopDriver) Dial(context.Context, Config) (Connection, int, error) {
	return nil, 0, nil
}

func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ = r.(string)
		}
	}()
	f()
	return ""
}

func TestRegisterPanicsOnADuplicateSchemeAsSQLRegisterDoes(t *testing.T) {
	Register("nop-test", nopDriver{})
	t.Cleanup(func() {
		registryMu.Lock()
		delete(registry, "nop-test")
		registryMu.Unlock()
	})
	if d, ok := Lookup("nop-test"); !ok || d.Name() != "nop" {
		t.Fatalf("Lookup = %v, %v", d, ok)
	}
	if msg := panicMessage(func() { Register("nop-test", nopDriver{}) }); !strings.Contains(msg, "Register called twice for scheme nop-test") {
		t.Errorf("duplicate: %q", msg)
	}
	if msg := panicMessage(func() { Register("other", nil) }); !strings.Contains(msg, "nil") {
		t.Errorf("nil driver: %q", msg)
	}
	if msg := panicMessage(func() { Register("", nopDriver{}) }); !strings.Contains(msg, "empty scheme") {
		t.Errorf("empty scheme: %q", msg)
	}
}
