package rabbitmq_test

import (
	"context"
	"testing"
	"time"

	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/rabbitmq"
	"github.com/acemq-go/acemq/transport/transporttest"
)

// TestConformance runs the transport conformance suite against a real
// RabbitMQ node: the same suite the in-process broker passes, so
// "memory:// is no kinder than RabbitMQ" is tested, not promised.
func TestConformance(t *testing.T) {
	url := testenv.AMQPURL(t)
	dial := func(t *testing.T, onBlocked func(bool, string)) transport.Connection {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, _, err := rabbitmq.Driver{}.Dial(ctx, transport.Config{URL: url, ConnectionName: "conformance", OnBlocked: onBlocked})
		if err != nil {
			t.Fatalf("dial %s: %v", url, err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	transporttest.Run(t, transporttest.Harness{
		Dial:              func(t *testing.T) transport.Connection { return dial(t, nil) },
		DialWithOnBlocked: dial,
		// A real resource alarm: RabbitMQ blocks publishing connections and
		// stops reading them until the watermark is restored.
		Block: func(t *testing.T, reason string) {
			t.Cleanup(func() { testenv.RabbitCtl(t, "set_vm_memory_high_watermark", "0.4") })
			testenv.RabbitCtl(t, "set_vm_memory_high_watermark", "0")
		},
		Unblock: func(t *testing.T) {
			testenv.RabbitCtl(t, "set_vm_memory_high_watermark", "0.4")
		},
		DropConnections: func(t *testing.T) {
			testenv.RabbitCtl(t, "close_all_connections", "conformance suite")
		},
		RabbitMQ4: testenv.RabbitMajor(t) >= 4,
	})
}
