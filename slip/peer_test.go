package slip

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
)

// A message a Python service started (the contract's slip JSON as a text
// header, one step already done) is followed by our consumer and goes on
// as a JSON slip: the done step kept as it was, the step just run moved to
// done, no route headers added.
func TestAPeersSlipIsFollowedAndGoesOnAsAJSONSlip(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		ctx := context.Background()
		ex := "slip-peer-" + strings.ReplaceAll(t.Name(), "/", "-")
		charge, ship := ex+".charge", ex+".ship"
		top := acemq.NewTopology().Exchange(ex, acemq.Direct, acemq.ExchangeOptions{}).
			Queue(charge, acemq.QueueOptions{Type: acemq.Classic}).Queue(ship, acemq.QueueOptions{Type: acemq.Classic}).
			Bind(charge, ex, "order.charge").Bind(ship, ex, "order.ship")
		if err := c.Apply(ctx, top); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, q := range []string{charge, ship, acemq.DeadLetterQueue(charge), acemq.ParkedQueue(charge)} {
				_, _ = c.DeleteQueue(context.Background(), q)
			}
		})
		seen := follower(t, c, charge)
		peerSlip := strings.ReplaceAll(contractSlip, "orders-events", ex)
		if err := c.PublishRaw(ctx, acemq.RawMessage{
			Exchange: ex, RoutingKey: "order.charge", ContentType: "application/json", Body: []byte(`{"order":"o-9"}`),
			Headers: map[string]any{"x-acemq-id": "py-1", "x-acemq-correlation": "corr-9", Header: peerSlip},
		}); err != nil {
			t.Fatal(err)
		}
		next(t, seen)
		m := brokertest.Pull(t, c, ship)
		raw, ok := m.Headers[Header].(string)
		if !ok {
			t.Fatalf("the hop's %s is %T, want the JSON text the peer wrote", Header, m.Headers[Header])
		}
		if _, ok := m.Headers["x-acemq-route"]; ok {
			t.Fatal("a slip message went on with route headers added")
		}
		var got struct {
			Steps []map[string]any `json:"steps"`
			Done  []map[string]any `json:"done"`
		}
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Steps) != 1 || got.Steps[0]["routingKey"] != "order.ship" || len(got.Done) != 2 ||
			got.Done[0]["name"] != "validate" || got.Done[0]["completedAt"] != "2026-10-05T12:00:01Z" ||
			got.Done[1]["name"] != "charge" || got.Done[1]["exchange"] != ex || got.Done[1]["completedAt"] == nil {
			t.Fatalf("the slip that went on: %s", raw)
		}
		if e := m.Envelope; e.CorrelationID != "corr-9" || e.CausationID != "py-1" || e.ID == "py-1" || string(m.Body) != `{"order":"o-9"}` {
			t.Fatalf("the hop: id %s correlation %s causation %s body %s", e.ID, e.CorrelationID, e.CausationID, m.Body)
		}
	})
}
