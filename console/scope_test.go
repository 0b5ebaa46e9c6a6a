package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
	"github.com/acemq-go/acemq/console/internal/testenv"
)

// A live queue is refused on every route, read-only or not, before
// anything reads it: the message is never taken (its redelivered flag
// stays clear, and on a quorum queue x-delivery-count stays absent).
func TestEveryRouteRefusesALiveQueue(t *testing.T) {
	forEachBroker(t, testEveryRouteRefusesALiveQueue)
}

func testEveryRouteRefusesALiveQueue(t *testing.T, u string) {
	for _, readOnly := range []bool{false, true} {
		f := newFixture(t, u, func(c *console.Config) { c.ReadOnly = readOnly })
		ctx := context.Background()
		live := testenv.Unique("console.live")
		if err := f.conn.Apply(ctx, acemq.NewTopology().Queue(live, acemq.QueueOptions{Type: acemq.Quorum})); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = f.conn.DeleteQueue(context.Background(), live) })
		ids := deadLetter(t, f.conn, live, letter{reason: ""})
		for _, p := range []string{"/q/" + live, "/q/" + live + "/m/" + ids[0], "/q/" + live + "/m/" + ids[0] + "/raw", "/q/" + live + "/m/" + ids[0] + "/other"} {
			resp, body := f.get(p)
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "is not a dead-letter queue") || !strings.Contains(body, "never a live queue") {
				t.Errorf("read-only %v: GET %s: %d, want 404 saying it is not a dead-letter queue", readOnly, p, resp.StatusCode)
			}
		}
		for _, a := range []string{"download", "replay", "park", "purge"} {
			resp, body := f.post("/q/"+live+"/"+a, url.Values{"confirm": {"yes"}, "confirm_name": {live}})
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "is not a dead-letter queue") {
				t.Errorf("read-only %v: POST %s on a live queue: %d, want 404", readOnly, a, resp.StatusCode)
			}
		}
		p, err := f.conn.NewPuller(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m, ok, err := p.Pull(ctx, live)
		if err != nil || !ok {
			t.Fatalf("the live message is gone: %v %v", ok, err)
		}
		// RabbitMQ 3.10 writes x-delivery-count 0 on a first delivery.
		v, ok := m.Headers["x-delivery-count"]
		if counted := ok && fmt.Sprint(v) != "0"; m.Redelivered || counted {
			t.Errorf("read-only %v: the console read the live queue (redelivered %v, headers %v)", readOnly, m.Redelivered, m.Headers)
		}
		_ = m.Nack(true)
		p.Close()
	}
}
