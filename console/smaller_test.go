package console_test

import (
	"context"

	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
)

// When the preview counts among the first ScanLimit messages only, the
// confirm button does not name that count as what the replay moves (it
// examines every message present). The preview's read, and the queue
// page's, are audited. (Before: "Replay 142 message(s)" moved 714.)
func TestPreviewButtonDoesNotUnderstateTheReplay(t *testing.T) {
	f := newFixture(t, memURL(t), func(c *console.Config) { c.ScanLimit = 10 })
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	ls := make([]letter, 30)
	for i := range ls {
		ls[i] = letter{reason: "boom"}
	}
	deadLetter(t, f.conn, dlq, ls...)
	f.get("/q/" + url.PathEscape(dlq))
	_, body := f.post("/q/"+url.PathEscape(dlq)+"/replay", nil)
	if strings.Contains(body, "Replay 10 message(s)") || !strings.Contains(body, "Replay every matching message (of the 30, not only the 10 counted)") {
		t.Fatalf("the confirm button:\n%s", body)
	}
	_, audit := f.get("/audit")
	for _, want := range []string{"read 10 of 30", "replay preview"} {
		if !strings.Contains(audit, want) {
			t.Fatalf("the audit log lacks %q:\n%s", want, audit)
		}
	}
	if resp, body := f.post("/q/"+url.PathEscape(dlq)+"/replay", url.Values{"confirm": {"yes"}}); resp.StatusCode != 200 || !strings.Contains(body, "moved 30") {
		t.Fatalf("the replay: %d %s", resp.StatusCode, body)
	}
}

// The message page shows the AMQP message-id and correlation-id
// properties, and cuts a huge value (a 100 KB type) where the page shows
// it; the raw bytes keep everything.
func TestMessagePageShowsAMQPPropertiesAndCutsHugeValues(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	env := acemq.NewEnvelope()
	env.Type = strings.Repeat("T", 100<<10)
	env.Error = "boom"
	if err := f.conn.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: dlq, MessageID: "amqp-id-7", CorrelationID: "amqp-corr-9",
		Headers: env.WireHeaders(), Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	resp, body := f.get("/q/" + url.PathEscape(dlq) + "/m/" + url.PathEscape(env.ID))
	if resp.StatusCode != 200 || !strings.Contains(body, `id="amqp-message-id">amqp-id-7<`) || !strings.Contains(body, `id="amqp-correlation-id">amqp-corr-9<`) {
		t.Fatalf("the message page: %d\n%.3000s", resp.StatusCode, body)
	}
	if len(body) > 40<<10 {
		t.Fatalf("a 100 KB type makes the message page %d bytes", len(body))
	}
}

// In a 700 px wide window the reason column of a queue page keeps room to
// read (about 30 characters; before: five), and a message with a 100 KB
// type keeps its page short (before: 30,800 px tall).
func TestBrowserANarrowWindowAndAHugeType(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	ids := deadLetter(t, f.conn, dlq, letter{typ: strings.Repeat("T", 100<<10), reason: "exhausted 6 attempts: the payment gateway timed out after 30s"})
	tab := browser(t)
	f.signInBrowser(tab)
	do(t, tab, "a 700 px window", chromedp.EmulateViewport(700, 900))
	do(t, tab, "open the queue", chromedp.Navigate(f.srv.URL+"/q/"+url.PathEscape(dlq)))
	waitFor(t, tab, "the queue page", `document.querySelector("#messages tbody td.reason") !== null`)
	var w float64
	within(t, tab, "measuring the reason column", func(ctx context.Context) (err error) {
		w, err = chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelector("#messages tbody td.reason").getBoundingClientRect().width`))
		return err
	})
	if w < 180 {
		t.Fatalf("at 700 px the reason column is %.0f px wide, want at least 180 (about 30 characters)", w)
	}
	do(t, tab, "open the message", chromedp.Navigate(f.srv.URL+"/q/"+url.PathEscape(dlq)+"/m/"+url.PathEscape(ids[0])))
	waitFor(t, tab, "the message page", `document.querySelector("#envelope") !== null`)
	var h float64
	within(t, tab, "measuring the page", func(ctx context.Context) (err error) {
		h, err = chromedp.Run(ctx, chromedp.Evaluate[float64](`document.documentElement.scrollHeight`))
		return err
	})
	if h > 6000 {
		t.Fatalf("a 100 KB type makes the message page %.0f px tall", h)
	}
	t.Logf("reason column %.0f px at 700 px; message page %.0f px tall", w, h)
}
