package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console/internal/testenv"
)

var rowIDRE = regexp.MustCompile(`<td class="id"><a href="/q/[^/]+/m/([^"]+)">`)

// publishWithoutID puts a message with neither an x-acemq-id header nor a
// message-id into queue.
func publishWithoutID(t *testing.T, c *acemq.Conn, queue, reason, body string) {
	t.Helper()
	err := c.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: queue, ContentType: "application/json",
		Headers: map[string]any{"x-acemq-error": reason, "x-acemq-type": "OrderPlaced"}, Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
}

// A message without an id gets the same id on every read, two identical
// ones are told apart, and each can be viewed, downloaded raw, replayed and
// parked by that id.
func TestAMessageWithoutAnIDCanBeViewedReplayedAndParked(t *testing.T) {
	forEachBroker(t, testAMessageWithoutAnIDCanBeViewedReplayedAndParked)
}

func testAMessageWithoutAnIDCanBeViewedReplayedAndParked(t *testing.T, u string) {
	f := newFixture(t, u, nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	ids := deadLetter(t, f.conn, dlq, letter{reason: "has an id"})
	publishWithoutID(t, f.conn, dlq, "no id", `{"n":1}`)
	publishWithoutID(t, f.conn, dlq, "no id", `{"n":1}`) // identical
	publishWithoutID(t, f.conn, dlq, "no id", `{"n":2}`)
	read := func() []string {
		_, body := f.get("/q/" + dlq)
		var out []string
		for _, m := range rowIDRE.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	first, second := read(), read()
	if len(first) != 4 || !slices.Equal(first, second) {
		t.Fatalf("ids change between reads: %v then %v", first, second)
	}
	if first[0] != ids[0] {
		t.Fatalf("a message with an id is shown as %s, want %s", first[0], ids[0])
	}
	if first[1] == first[2] || first[2] == first[3] || first[1] == first[3] {
		t.Fatalf("identical messages share an id: %v", first)
	}
	for _, id := range first[1:] {
		if !strings.HasPrefix(id, "content-") {
			t.Fatalf("id %s for a message without one", id)
		}
		resp, body := f.get("/q/" + dlq + "/m/" + id)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="no-id"`) {
			t.Fatalf("GET its page: %d", resp.StatusCode)
		}
		if resp, raw := f.get("/q/" + dlq + "/m/" + id + "/raw"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(raw, `{"n":`) {
			t.Fatalf("raw: %d %q", resp.StatusCode, raw)
		}
	}
	// Replay the second of the two identical ones: exactly one moves.
	resp, body := f.post("/q/"+dlq+"/replay", url.Values{"id": {first[2]}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="plan-count">1<`) {
		t.Fatalf("preview: %d %s", resp.StatusCode, body)
	}
	resp, body = f.post("/q/"+dlq+"/replay", url.Values{"id": {first[2]}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "moved 1, skipped 3") {
		t.Fatalf("replay: %d %s", resp.StatusCode, body)
	}
	if n := depth(t, f.conn, q); n != 1 {
		t.Fatalf("%s holds %d, want the 1 replayed", q, n)
	}
	// Park the different one by its id.
	resp, body = f.post("/q/"+dlq+"/park", url.Values{"id": {first[3]}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "moved 1, skipped 2") {
		t.Fatalf("park: %d %s", resp.StatusCode, body)
	}
	ctx := t.Context()
	p, _ := f.conn.NewPuller(ctx)
	defer p.Close()
	m, ok, err := p.Pull(ctx, acemq.ParkedQueue(q))
	if err != nil || !ok || string(m.Body) != `{"n":2}` {
		t.Fatalf("parked: %v %v %+v", ok, err, m)
	}
	// What is left: the one with an id and one of the identical pair,
	// still at the id the first of them had.
	if got := read(); !slices.Equal(got, []string{ids[0], first[1]}) {
		t.Fatalf("left %v, want %v", got, []string{ids[0], first[1]})
	}
	// Purge takes the rest, id or not.
	if resp, body := f.post("/q/"+dlq+"/purge", url.Values{"confirm_name": {dlq}}); resp.StatusCode != http.StatusOK || !strings.Contains(body, "purged 2") {
		t.Fatalf("purge: %d %s", resp.StatusCode, body)
	}
}

// On a quorum queue a read raises the broker's counts (x-delivery-count on
// RabbitMQ 3.10, x-acquired-count on 4.3 and memory://): a message without
// an id keeps its id across reads all the same.
func TestAMessageWithoutAnIDKeepsItsIDAcrossReadsOfAQuorumQueue(t *testing.T) {
	forEachBroker(t, func(t *testing.T, u string) {
		f := newFixture(t, u, nil)
		q := testenv.Unique("console.quorum") + ".dlq"
		if err := f.conn.Apply(t.Context(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Quorum})); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = f.conn.DeleteQueue(context.Background(), q) })
		publishWithoutID(t, f.conn, q, "no id", `{"n":1}`)
		publishWithoutID(t, f.conn, q, "no id", `{"n":2}`)
		read := func() []string {
			_, body := f.get("/q/" + q)
			var out []string
			for _, m := range rowIDRE.FindAllStringSubmatch(body, -1) {
				out = append(out, m[1])
			}
			return out
		}
		first, second := read(), read()
		if len(first) != 2 || !slices.Equal(first, second) {
			t.Fatalf("ids change between reads of a quorum queue: %v then %v", first, second)
		}
	})
}
