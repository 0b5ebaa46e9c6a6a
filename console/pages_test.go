package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
)

// The overview puts the deepest queue first and names the broker and
// vhost.
func TestOverviewSortsByDepthAndNamesTheBroker(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	var qs []string
	for range 3 {
		qs = append(qs, seedQueue(t, f.conn))
	}
	deadLetter(t, f.conn, acemq.DeadLetterQueue(qs[2]), letter{reason: "a"}, letter{reason: "b"}, letter{reason: "c"})
	deadLetter(t, f.conn, acemq.DeadLetterQueue(qs[1]), letter{reason: "a"})
	_, body := f.get("/")
	first := strings.Index(body, `data-queue="`+acemq.DeadLetterQueue(qs[2])+`"`)
	second := strings.Index(body, `data-queue="`+acemq.DeadLetterQueue(qs[1])+`"`)
	empty := strings.Index(body, `data-queue="`+acemq.DeadLetterQueue(qs[0])+`"`)
	if first < 0 || !(first < second && second < empty) {
		t.Fatalf("overview order: %d %d %d, want the 3-message queue, then the 1-message one, then the empty one", first, second, empty)
	}
	if !strings.Contains(body, `id="broker">Broker `+memURL(t)) {
		t.Fatal("the overview does not name the broker")
	}
	g := newFixture(t, memURL(t), func(c *console.Config) {
		c.URL = "amqp://ops:s3cr3t@rabbit.internal:5672/orders"
		c.ListQueues = func(context.Context) ([]string, error) { return nil, nil }
	})
	if _, body := g.get("/"); !strings.Contains(body, `id="broker">Broker amqp://rabbit.internal:5672, vhost orders<`) || strings.Contains(body, "s3cr3t") {
		t.Fatalf("broker label: %s", body)
	}
}

// "Oldest" is the oldest message's age, not the head's: a replayed
// message goes to the back of the queue with its old first-seen time.
func TestOverviewOldestIsTheOldestMessageNotTheHead(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	ctx := context.Background()
	for i, ago := range []time.Duration{time.Minute, 5 * time.Hour} { // the head is young
		env := acemq.NewEnvelope()
		env.FirstSeen = time.Now().Add(-ago)
		env.Error = "x"
		if err := f.conn.PublishRaw(ctx, acemq.RawMessage{RoutingKey: dlq, MessageID: env.ID, Headers: env.WireHeaders(), Body: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	row := f.overviewJSON()[dlq]
	if got, _ := row["oldest"].(string); !strings.HasPrefix(got, "5h") {
		t.Fatalf("oldest %q, want 5h (the second message), not the head's 1m", got)
	}
}

// The reasons beyond the five largest groups can be drilled into, and the
// selected group is highlighted.
func TestOtherReasonsCanBeDrilledIntoAndTheSelectedGroupIsHighlighted(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	var ls []letter
	for i, r := range []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"} {
		for range 8 - i {
			ls = append(ls, letter{reason: r})
		}
	}
	deadLetter(t, f.conn, dlq, ls...)
	_, body := f.get("/q/" + dlq)
	if !strings.Contains(body, `id="rest-groups"`) || !strings.Contains(body, `href="/q/`+dlq+`?group=golf"`) {
		t.Fatal("the other reasons have no drill-down")
	}
	_, body = f.get("/q/" + dlq + "?group=golf")
	if !strings.Contains(body, `<tr data-group="golf" class="selected" aria-current="true">`) || !strings.Contains(body, `id="matching">2<`) {
		t.Fatal("the selected other reason is not highlighted or not shown")
	}
	_, body = f.get("/q/" + dlq + "?group=alpha")
	if !strings.Contains(body, `<tr data-group="alpha" class="selected" aria-current="true">`) {
		t.Fatal("the selected group is not highlighted")
	}
}

// Control characters from a message never reach a page raw (one rule with
// the CLI: internal/safetext), and a very long value is cut in the table
// with the full value on request.
func TestMessageTextIsEscapedAndLongValuesAreCut(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	esc := "\x1b]52;c;cGF5bG9hZA==\x07\x1b[2J\u202e"
	long := strings.Repeat("VeryLongTypeName", 625) // 10,000 characters
	ids := deadLetter(t, f.conn, dlq,
		letter{reason: "bad " + esc, typ: "T" + esc, contentType: "text/plain", body: []byte("body " + esc + "\nline 2"), headers: map[string]any{"x-note" + esc: "v" + esc}},
		letter{reason: "long", typ: long})
	for _, p := range []string{"/", "/q/" + dlq, "/q/" + dlq + "/m/" + ids[0], "/audit"} {
		_, body := f.get(p)
		for _, bad := range []string{"\x1b", "\x07", "\u202e"} {
			if strings.Contains(body, bad) {
				i := strings.Index(body, bad)
				t.Errorf("%s carries a raw %q: %s", p, bad, body[max(0, i-200):i+20])
			}
		}
	}
	_, body := f.get("/q/" + dlq + "/m/" + ids[0])
	if !strings.Contains(body, `\x1b[2J`) || !strings.Contains(body, "body \\x1b]52;c;cGF5bG9hZA==\\x07\\x1b[2J\\u202e\nline 2") {
		t.Error("the message page does not show the control characters escaped")
	}
	_, body = f.get("/q/" + dlq)
	if strings.Contains(body, long) {
		t.Error("the queue page lists a 10,000-character type in full")
	}
	if !strings.Contains(body, strings.Repeat("VeryLongTypeName", 10)+"…") {
		t.Error("the queue page does not show the start of the long type")
	}
	// The message page shows the first 2,000 characters of a value in its
	// envelope table (4,096 of a header), so a huge value cannot make the
	// page tens of thousands of pixels tall; the raw bytes have it all.
	if _, page := f.get("/q/" + dlq + "/m/" + ids[1]); strings.Contains(page, long) || !strings.Contains(page, strings.Repeat("VeryLongTypeName", 125)+"…") {
		t.Error("the message page does not show the start of the long type, cut")
	}
}

func TestAShortTokenIsRefusedWithWhatToDo(t *testing.T) {
	c := connect(t, memURL(t))
	_, err := console.New(c, console.Config{URL: memURL(t), Token: "short"})
	if err == nil || !strings.Contains(err.Error(), "--token") || !strings.Contains(err.Error(), "16") {
		t.Fatalf("short token: %v", err)
	}
}

// A failed message's page tells its history: first publish, the retry
// rungs it waited on, what the broker did, replays, and the attempt that
// set it aside with its reason.
func TestMessagePageShowsTheHistory(t *testing.T) {
	forEachBroker(t, testMessagePageShowsTheHistory)
}

func testMessagePageShowsTheHistory(t *testing.T, u string) {
	f := newFixture(t, u, nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	deaths := []any{
		map[string]any{"queue": q + ".retry.80s", "reason": "expired", "count": int64(1), "time": t0.Add(2 * time.Minute), "exchange": "", "routing-keys": []any{q + ".retry.80s"}},
		map[string]any{"queue": q + ".retry.40s", "reason": "expired", "count": int64(2), "time": t0.Add(time.Minute), "exchange": "", "routing-keys": []any{q + ".retry.40s"}},
		map[string]any{"queue": q, "reason": "delivery_limit", "count": int64(1), "time": t0.Add(30 * time.Second), "exchange": "", "routing-keys": []any{q}},
	}
	env := acemq.NewEnvelope()
	env.FirstSeen = t0
	env.Attempt = 6
	env.Error = "exhausted 6 attempts: payment gateway timed out"
	h := env.WireHeaders()
	h["x-death"] = deaths
	h["acemq-replayed-from"] = dlq
	h["acemq-replayed-at"] = t0.Add(time.Hour).Format("2006-01-02T15:04:05.000Z")
	h["acemq-replay-count"] = int64(1)
	if err := f.conn.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: dlq, MessageID: env.ID, Headers: h, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	_, body := f.get("/q/" + dlq + "/m/" + env.ID)
	i := strings.Index(body, `<table id="history">`)
	if i < 0 {
		t.Fatal("the message page has no history")
	}
	hist := body[i : i+strings.Index(body[i:], "</table>")]
	want := []string{
		"2026-11-30 09:00:00 UTC</td><td>first published (attempt 1)",
		"2026-11-30 09:00:30 UTC</td><td>dead-lettered by the broker from " + q + "</td><td class=\"reason\">delivered more times than the queue&#39;s delivery limit",
		"2026-11-30 09:01:00 UTC</td><td>waited 40s on the retry rung " + q + ".retry.40s, then went back to " + q + " for its next attempt (2 times",
		"2026-11-30 09:02:00 UTC</td><td>waited 80s on the retry rung " + q + ".retry.80s",
		"2026-11-30 10:00:00 UTC</td><td>replayed from " + dlq,
		"time not recorded</td><td>attempt 6 failed and the message was set aside</td><td class=\"reason\">exhausted 6 attempts: payment gateway timed out",
	}
	at := 0
	for _, w := range want {
		j := strings.Index(hist[at:], w)
		if j < 0 {
			t.Fatalf("history lacks, in order, %q:\n%s", w, hist)
		}
		at += j + len(w)
	}
}
