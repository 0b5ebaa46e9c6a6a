package rabbitmq_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/rabbitmq"
	"github.com/acemq-go/acemq/transport/transporttest"
)

// transportSettings are the settings of the RabbitMQ transport the README
// offers (its "Settings" section; dial.go's framesSetting and
// coalesceSetting): every combination of frames=native|amqp091 and
// coalesce=on|off. The first is the default.
var transportSettings = []string{
	"frames=native&coalesce=on",
	"frames=native&coalesce=off",
	"frames=amqp091&coalesce=on",
	"frames=amqp091&coalesce=off",
}

// TestConformance runs the transport conformance suite against a real
// RabbitMQ node, once per transport setting: the same suite the
// in-process broker passes, so "memory:// is no kinder than RabbitMQ" is
// tested, not promised, whichever path writes the frames.
//
// The suite raises a memory alarm and closes every connection of the node
// (BlockHoldsConfirmsUntilUnblock, DropConnectionsEndsWith320AndRequeues):
// run it on a node of its own, never a shared one.
func TestConformance(t *testing.T) {
	base := testenv.AMQPURL(t)
	for _, setting := range transportSettings {
		t.Run(setting, func(t *testing.T) {
			runConformance(t, withSettings(t, base, setting))
		})
	}
}

// runConformance runs the suite with every connection dialled to url.
func runConformance(t *testing.T, url string) {
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
		RabbitMQ4:     testenv.RabbitMajor(t) >= 4,
		CountsNacks:   testenv.RabbitCountsNacks(t),
		AcquiredCount: !testenv.RabbitCountsNacks(t),
		// Measured on 3.10.8 (and not on 4.3.6): docs/support.md.
		QuorumReturnsBehind:             testenv.RabbitMajor(t) < 4,
		ClassicSingleActiveCancelStalls: testenv.RabbitMajor(t) < 4,
		KeepsPublishedDeaths:            testenv.RabbitMajor(t) < 4,
	})
}

// withSettings adds the query settings ("frames=amqp091&coalesce=off") to
// a broker URL.
func withSettings(t *testing.T, raw, settings string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	add, err := url.ParseQuery(settings)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, v := range add {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	return u.String()
}
