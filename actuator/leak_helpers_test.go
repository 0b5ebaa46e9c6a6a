package actuator_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/actuator/internal/testenv"
)

// The helpers TestNoSecretAppearsInAnythingAConnPrints needs. The test
// lived in the root package until the actuator became a module of its own
// (its scrape of the actuator's pages kept Prometheus in the root go.mod).

type item struct {
	N int `json:"n"`
}

func randomSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "pw-" + hex.EncodeToString(b)
}

func hostPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(u.Hostname(), u.Port())
}

func withoutUser(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = nil
	return u.String()
}

// classicQueue declares a classic queue of a unique name and deletes it
// (and its dead-letter, parking and retry queues) at cleanup.
func classicQueue(t *testing.T, c *acemq.Conn, prefix string) string {
	t.Helper()
	q := testenv.Unique(prefix)
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := acemq.Connect(ctx, testenv.AMQPURL(t), acemq.Config{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		defer c.Close(ctx)
		for _, n := range []string{q, q + ".dlq", q + ".parked", q + ".retry.1s"} {
			_, _ = c.DeleteQueue(ctx, n)
		}
	})
	return q
}
