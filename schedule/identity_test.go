package schedule

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
)

// controlMessage publishes, to the control queue itself, a control message
// due now with id, correlation and a body: what the scheduler reads when a
// rung has expired, or reads again after a crash between its delivery's
// confirm and the ack.
func controlMessage(t *testing.T, c *acemq.Conn, target, id, corr, body string) {
	t.Helper()
	env := acemq.NewEnvelope()
	env.ID, env.CorrelationID, env.Type = id, corr, MessageType
	h := env.WireHeaders()
	h[HeaderExchange] = ""
	h[HeaderRoutingKey] = target
	h[HeaderDueAt] = time.Now().UnixMilli()
	h[HeaderContentType] = "text/plain; charset=utf-8"
	h[HeaderRemaining] = int64(0)
	if err := c.PublishRaw(context.Background(), acemq.RawMessage{
		Exchange: Exchange, RoutingKey: DueQueue, ContentType: hopContentType, MessageID: id, Headers: h, Body: []byte(body),
	}); err != nil {
		t.Fatal(err)
	}
}

// A control message read twice (a scheduler that crashed after the
// delivery's confirm and before its ack) delivers twice with one id,
// derived from the scheduled message's, and its correlation and causation:
// the repeat is recognisable. Before, each delivery had a fresh id and
// correlation.
func TestEveryDeliveryOfAScheduledMessageHasOneIDAndItsCorrelation(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		startScheduler(t, c)
		q := brokertest.Queue(t, c, "schedule.identity")
		id := "scheduled-" + strings.ReplaceAll(t.Name(), "/", "-")
		for range 2 {
			controlMessage(t, c, q, id, "order-7", "remind")
		}
		var ids []string
		for range 2 {
			m := brokertest.Pull(t, c, q)
			if m.Envelope.CorrelationID != "order-7" || m.Envelope.CausationID != id || string(m.Body) != "remind" {
				t.Fatalf("delivery %+v: want correlation order-7, causation %s", m.Envelope, id)
			}
			ids = append(ids, m.Envelope.ID)
		}
		if ids[0] != ids[1] || ids[0] != DeliveryID(id) || ids[0] == id {
			t.Fatalf("delivery ids %v, want both %s (derived from %s, not equal to it)", ids, DeliveryID(id), id)
		}
	})
}

func TestDeliveryIDIsAVersion5UUIDOfTheScheduledID(t *testing.T) {
	a, b := DeliveryID("x"), DeliveryID("y")
	if a == b || a != DeliveryID("x") || len(a) != 36 || a[14] != '5' || !strings.ContainsRune("89ab", rune(a[19])) {
		t.Fatalf("DeliveryID: %s %s", a, b)
	}
}

// behindClock is a producer's clock that runs behind the broker's and
// the scheduler's.
type behindClock struct{ by time.Duration }

func (b behindClock) Now() time.Time { return time.Now().Add(-b.by) }

// A producer whose clock is 2 s behind the scheduler's schedules a message
// in 3 s: it used to arrive after about 1 s (the scheduler compared the
// producer's due time with its own clock), 2 s early. The wait travels with
// each hop, measured by the rungs' TTLs, so it is never more than a second
// early, whatever the clocks say.
func TestAProducerClockBehindMakesNoMessageEarly(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		startScheduler(t, c)
		q := brokertest.Queue(t, c, "schedule.skew")
		got := target(t, c, q)
		start := time.Now()
		if err := After(context.Background(), c, "", q, "skewed", 3*time.Second, WithCodec(acemq.Text()), WithClock(behindClock{2 * time.Second})); err != nil {
			t.Fatal(err)
		}
		select {
		case a := <-got:
			if took := a.at.Sub(start); took < 2*time.Second {
				t.Fatalf("a message scheduled in 3 s arrived after %v, more than a second early", took)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the scheduled message did not arrive in 30 s")
		}
	})
}

func ExampleDeliveryID() {
	fmt.Println(DeliveryID("0f6c2d7e-5d8f-4a4b-9c1e-3b1d5e2a7c90"))
	// Output: 8fe5b56f-d732-5d6f-9e0e-854c216c38bd
}
