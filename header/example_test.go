package header_test

import (
	"fmt"
	"strings"

	"github.com/acemq-go/acemq/header"
)

// Application headers use a prefix of their own: every name under
// header.ReservedPrefix belongs to the envelope.
func Example() {
	for _, name := range []string{header.Attempt, "x-shop-tenant", header.ReplyTo} {
		fmt.Println(name, strings.HasPrefix(name, header.ReservedPrefix))
	}
	// Output:
	// x-acemq-attempt true
	// x-shop-tenant false
	// acemq-reply-to false
}
