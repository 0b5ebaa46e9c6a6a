package memory

import (
	"context"
	"testing"

	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/transporttest"
)

func TestConformance(t *testing.T) {
	name := "conformance-" + t.Name()
	t.Cleanup(func() { Delete(name) })
	dial := func(t *testing.T, onBlocked func(bool, string)) transport.Connection {
		t.Helper()
		c, _, err := Driver{}.Dial(context.Background(), transport.Config{URL: "memory://" + name, OnBlocked: onBlocked})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		return c
	}
	transporttest.Run(t, transporttest.Harness{
		Dial:              func(t *testing.T) transport.Connection { return dial(t, nil) },
		DialWithOnBlocked: dial,
		Block:             func(_ *testing.T, reason string) { Lookup(name).Block(reason) },
		Unblock:           func(*testing.T) { Lookup(name).Unblock() },
		DropConnections:   func(*testing.T) { Lookup(name).DropConnections() },
	})
}
