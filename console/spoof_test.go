package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
)

// spoofFixture is a console over two dead-letter queues that looked the
// same before: one whose name holds U+202E (RIGHT-TO-LEFT OVERRIDE) and
// one literally named with the six characters \u202e. The first holds one
// message, the second two.
func spoofFixture(t *testing.T) (f *fixture, bidi, literal string) {
	t.Helper()
	bidi, literal = "shop.\u202egpj.dlq", `shop.\u202egpj.dlq`
	var names []string
	f = newFixture(t, memURL(t), func(c *console.Config) {
		c.ListQueues = func(context.Context) ([]string, error) { return names, nil }
	})
	ctx := context.Background()
	if err := f.conn.Apply(ctx, acemq.NewTopology().Queue("shop", acemq.QueueOptions{}).Queue(bidi, acemq.QueueOptions{}).Queue(literal, acemq.QueueOptions{})); err != nil {
		t.Fatal(err)
	}
	names = []string{bidi, literal}
	deadLetter(t, f.conn, bidi, letter{reason: "boom"})
	deadLetter(t, f.conn, literal, letter{reason: "boom"}, letter{reason: "boom"})
	return f, bidi, literal
}

// Links and API values carry the real name, percent-encoded; the page
// marks every escaped character, so the two names do not look alike; each
// link opens its own queue, and an action on one moves only its messages.
// (Before: both showed and linked as the literal name; the real one could
// not be reached, and acting on "it" acted on the other.)
func TestBidiQueueNamesAreReachableAndTellApart(t *testing.T) {
	f, bidi, literal := spoofFixture(t)
	rows := f.overviewJSON()
	if rows[bidi] == nil || rows[literal] == nil {
		t.Fatalf("/api/overview does not carry both real names: %v", rows)
	}
	_, page := f.get("/")
	bidiHref := "/q/" + url.PathEscape(bidi)
	literalHref := "/q/" + url.PathEscape(literal)
	if bidiHref == literalHref || !strings.Contains(page, `href="`+bidiHref+`"`) || !strings.Contains(page, `href="`+literalHref+`"`) {
		t.Fatalf("the overview's links are not %s and %s:\n%s", bidiHref, literalHref, page)
	}
	if !strings.Contains(page, `shop.<span class="esc"`) || !strings.Contains(page, `>shop.\u202egpj.dlq</a>`) {
		t.Fatalf("the overview does not mark the escape in one name and not the other:\n%s", page)
	}
	for q, want := range map[string]int{bidi: 1, literal: 2} {
		resp, body := f.get("/q/" + url.PathEscape(q))
		if resp.StatusCode != 200 || !strings.Contains(body, fmt.Sprintf(`<b id="matching">%d</b>`, want)) {
			t.Fatalf("%q's page: %d, want %d messages:\n%s", q, resp.StatusCode, want, body)
		}
	}
	if resp, _ := f.post("/q/"+url.PathEscape(bidi)+"/purge", url.Values{"confirm_name": {bidi}}); resp.StatusCode != 200 {
		t.Fatalf("purge: %d", resp.StatusCode)
	}
	if depth(t, f.conn, bidi) != 0 || depth(t, f.conn, literal) != 2 {
		t.Fatalf("purging %q left %d there and %d in %q", bidi, depth(t, f.conn, bidi), depth(t, f.conn, literal), literal)
	}
}

// A zero-width character in an id is seen: the id is shown with the
// character escaped and marked, linked by its real value, and it is the
// message's own id (not "no id"); the id without it is another message.
// (Before: "weird-1<U+200B>" showed as "weird-1" and was called id-less.)
func TestZeroWidthAndBidiIDsAreShownAndTheirOwn(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	deadLetter(t, f.conn, dlq, letter{id: "weird-1\u200b", reason: "zw"}, letter{id: "weird-1", reason: "plain"}, letter{id: "order-\u202e1", reason: "bidi"})
	_, page := f.get("/q/" + url.PathEscape(dlq))
	if !strings.Contains(page, `weird-1<span class="esc" title="an escaped character: the name holds this character, not these letters">\u200b</span>`) {
		t.Fatalf("the queue page does not show the zero-width space:\n%s", page)
	}
	if strings.Contains(page, "no id</span>") {
		t.Fatalf("a message with its own id is called id-less:\n%s", page)
	}
	for id, reason := range map[string]string{"weird-1\u200b": "zw", "weird-1": "plain", "order-\u202e1": "bidi"} {
		resp, body := f.get("/q/" + url.PathEscape(dlq) + "/m/" + url.PathEscape(id))
		if resp.StatusCode != 200 || !strings.Contains(body, `id="reason">`+reason+`<`) || strings.Contains(body, `id="no-id"`) {
			t.Fatalf("message %q: %d\n%s", id, resp.StatusCode, body)
		}
	}
	// Replaying by the real id moves that message only, and the audit
	// log records which id.
	if resp, body := f.post("/q/"+url.PathEscape(dlq)+"/replay", url.Values{"id": {"weird-1\u200b"}, "confirm": {"yes"}}); resp.StatusCode != 200 || !strings.Contains(body, "moved 1") {
		t.Fatalf("replay by id: %d %s", resp.StatusCode, body)
	}
	if got := drainIDs(t, f.conn, q); len(got) != 1 || got[0] != "weird-1\u200b" {
		t.Fatalf("the replay moved %q", got)
	}
	_, audit := f.get("/audit")
	if !strings.Contains(audit, `1 id(s): <code>weird-1\u200b</code>`) {
		t.Fatalf("the audit log does not record which id:\n%s", audit)
	}
}

// A reason group keeps its escapes as escapes: the digits of \x1b are not
// taken for a number. (Before: \x1b showed as \xNb.)
func TestReasonGroupsKeepEscapes(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	deadLetter(t, f.conn, dlq, letter{reason: "bad \x1b[2J after 30s"}, letter{reason: "bad \x1b[2J after 12s"})
	_, page := f.get("/q/" + url.PathEscape(dlq))
	if !strings.Contains(page, `bad \x1b[NJ after Ns</td><td class="num">2</td>`) || strings.Contains(page, `\xNb`) {
		t.Fatalf("the reason group garbles its escape:\n%s", page)
	}
}

// In a browser: the overview shows the two names apart (one with a marked
// escape, one without), and each link opens its own queue.
func TestBrowserBidiQueueNamesOpenTheirOwnQueue(t *testing.T) {
	f, bidi, literal := spoofFixture(t)
	tab := browser(t)
	f.signInBrowser(tab)
	for q, want := range map[string]string{bidi: "1", literal: "2"} {
		name, _ := json.Marshal(q) // a JS string: \u202e there is the character
		row := fmt.Sprintf(`Array.from(document.querySelectorAll("#overview tr[data-queue]")).find(function (tr) { return tr.getAttribute("data-queue") === %s; })`, name)
		waitFor(t, tab, "the overview row of "+q, row+` !== undefined`)
		var shownText string
		var escs int
		within(t, tab, "reading the row", func(ctx context.Context) (err error) {
			if shownText, err = chromedp.Run(ctx, chromedp.Evaluate[string](row+`.querySelector("a").textContent`)); err != nil {
				return err
			}
			escs, err = chromedp.Run(ctx, chromedp.Evaluate[int](row+`.querySelectorAll("a span.esc").length`))
			return err
		})
		if shownText != `shop.\u202egpj.dlq` {
			t.Fatalf("%q's link reads %q", q, shownText)
		}
		if wantEsc := map[bool]int{true: 1, false: 0}[q == bidi]; escs != wantEsc {
			t.Fatalf("%q's link has %d marked escapes, want %d", q, escs, wantEsc)
		}
		within(t, tab, "open "+q, func(ctx context.Context) error {
			_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](row+`.querySelector("a").click() || true`))
			return err
		})
		waitFor(t, tab, "the queue page of "+q, fmt.Sprintf(`document.querySelector("#matching") !== null && document.querySelector("#matching").textContent === %q`, want))
		do(t, tab, "back to the overview", chromedp.Navigate(f.srv.URL+"/"))
	}
}

// The preview of a replay says which selected messages carry headers the
// Go client cannot read, and that they go out with their original bytes.
func TestReplayPreviewSaysUnreadableHeadersGoOutAsPublished(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	parked := acemq.ParkedQueue(q)
	deadLetter(t, f.conn, parked, letter{reason: "plain"})
	// As the RabbitMQ transport delivers such a message (here put as it is
	// on the in-process broker).
	env := acemq.NewEnvelope()
	h := env.WireHeaders()
	h["x-acemq-unreadable"] = `header "x-deep" nests tables or arrays 121 levels deep`
	h["acemq-unreadable-headers"] = []byte{6, 'x', '-', 'd', 'e', 'e', 'p', 'S', 0, 0, 0, 0}
	if err := f.conn.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: parked, MessageID: env.ID, Headers: h, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	_, body := f.post("/q/"+url.PathEscape(parked)+"/replay", nil)
	if !strings.Contains(body, `id="unreadable-note"><b>1</b> of them carry headers the Go AMQP client cannot read`) {
		t.Fatalf("the preview does not say it:\n%s", body)
	}
}
