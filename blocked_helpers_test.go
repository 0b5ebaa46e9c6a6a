package acemq_test

import (
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// notBlockedYet checks that raising b's alarm told c nothing: RabbitMQ
// tells a connection only when it publishes.
func notBlockedYet(t *testing.T, c *acemq.Conn, b *memory.Broker) {
	t.Helper()
	b.Block("low on memory")
	defer b.Unblock()
	if c.Blocked() {
		t.Fatal("the Conn was told it is blocked before it published; RabbitMQ tells nobody when an alarm is raised")
	}
}
