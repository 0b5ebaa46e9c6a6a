package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
)

// An outage in a real browser: the open overview keeps its rows, marked
// stale, under a sentence saying the queues are unknown when the listing
// fails (never "No .dlq or .parked queues"), and shows an unreadable depth
// as "unknown" with what to do when the AMQP side is gone.
func TestBrowserOverviewSaysWhatFailedInAnOutage(t *testing.T) {
	u := memURL(t)
	owner := connect(t, u)
	q := seedQueue(t, owner)
	dlq := acemq.DeadLetterQueue(q)
	deadLetter(t, owner, dlq, letter{reason: "a"}, letter{reason: "b"}, letter{reason: "c"})
	var listingDown atomic.Bool
	f := newFixture(t, u, func(c *console.Config) {
		c.ListQueues = func(context.Context) ([]string, error) {
			if listingDown.Load() {
				return nil, errors.New("cannot list queues: the RabbitMQ management API at http://127.0.0.1:15672/ did not answer (connection refused); enable the rabbitmq_management plugin or pass --management-url")
			}
			return []string{dlq, acemq.ParkedQueue(q)}, nil
		}
	})
	tab := browser(t)
	dir := t.TempDir()
	row := fmt.Sprintf(`tr[data-queue=%q]`, dlq)
	f.signInBrowser(tab)
	waitFor(t, tab, "the depth", fmt.Sprintf(`(document.querySelector(%q)||{}).textContent === "3"`, row+" td.depth"))

	listingDown.Store(true)
	waitFor(t, tab, "the listing error", `!document.querySelector("#overview-error").hidden && document.querySelector("#overview-error").textContent.includes("management API")`)
	waitFor(t, tab, "the rows kept, marked stale", fmt.Sprintf(`document.querySelector("#overview").classList.contains("stale") && document.querySelector(%q) !== null`, row))
	if body := text(t, tab, "body"); strings.Contains(body, "No .dlq or .parked queues") || !strings.Contains(body, `This is not "no dead letters"`) {
		t.Fatalf("during the listing outage the page reads:\n%s", body)
	}
	shot(t, tab, dir, "listing-down")

	listingDown.Store(false)
	waitFor(t, tab, "the listing back", `document.querySelector("#overview-error").hidden && !document.querySelector("#overview").classList.contains("stale")`)
	if err := f.conn.Close(context.Background()); err != nil { // the AMQP side is gone
		t.Fatal(err)
	}
	waitFor(t, tab, "the depth unknown", fmt.Sprintf(`(document.querySelector(%q)||{}).textContent === "unknown"`, row+" td.depth"))
	errRow := text(t, tab, row+" + tr.row-error")
	if !strings.Contains(errRow, "depth unknown") || !strings.Contains(errRow, "Check that the broker is up") {
		t.Fatalf("the row's error: %q", errRow)
	}
	if got := text(t, tab, row+" td.growth"); got != "" {
		t.Fatalf("the growth cell reads %q during the outage, want it empty (the error has its own row)", got)
	}
	shot(t, tab, dir, "amqp-down")
}

// The session cookie in a real browser: another web page on the same host
// (another port) receives the consoles' cookies, but not the token; two
// consoles on one host keep their own sessions; signing out ends one.
func TestBrowserTheCookieIsASessionAndConsolesDoNotCollide(t *testing.T) {
	u := memURL(t)
	a := newFixture(t, u, nil)
	b := newFixture(t, u, nil)
	var mu sync.Mutex
	var seen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Cookie"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<!doctype html><title>other</title><p id=other>another app on this host</p>"))
	}))
	t.Cleanup(other.Close)
	tab := browser(t)
	a.signInBrowser(tab)
	b.signInBrowser(tab)
	do(t, tab, "visit another app on the host", chromedp.Navigate(other.URL+"/"))
	waitFor(t, tab, "the other app", `document.querySelector("#other") !== null`)
	mu.Lock()
	cookies := strings.Join(seen, "; ")
	first := seen[0] // the page itself (a favicon request may follow)
	mu.Unlock()
	if strings.Count(first, "acemq_console_") != 2 {
		t.Fatalf("the other app received %q; want both consoles' cookies (browsers send a host's cookies to every port)", cookies)
	}
	if strings.Contains(cookies, token) {
		t.Fatalf("the other app received the console's token: %q", cookies)
	}
	do(t, tab, "back to console A", chromedp.Navigate(a.srv.URL+"/audit"))
	waitFor(t, tab, "console A still signed in", `document.querySelector("#audit") !== null && document.querySelector("#sign-out") !== null`)
	do(t, tab, "sign out of A", chromedp.Click("#sign-out"))
	waitFor(t, tab, "the signed-out page", `document.body.textContent.includes("Signed out")`)
	do(t, tab, "console A again", chromedp.Navigate(a.srv.URL+"/audit"))
	waitFor(t, tab, "A's sign-in form", `document.querySelector("input[name=token]") !== null && document.querySelector("#audit") === null`)
	do(t, tab, "console B again", chromedp.Navigate(b.srv.URL+"/audit"))
	waitFor(t, tab, "B still signed in", `document.querySelector("#audit") !== null`)
}

// A 10,000-character type, reason and origin do not widen the page: the
// queue page's table fits the window with reason and origin on screen,
// and the message page wraps the full value.
func TestBrowserLongValuesDoNotBreakTheLayout(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	long := strings.Repeat("VeryLongTypeName", 625)
	ids := deadLetter(t, f.conn, dlq,
		letter{typ: long, reason: "exhausted 6 attempts: " + strings.Repeat("x", 10000)},
		letter{reason: "short", headers: map[string]any{"x-note": strings.Repeat("y", 10000)}})
	tab := browser(t)
	dir := t.TempDir()
	f.signInBrowser(tab)
	do(t, tab, "open the queue", chromedp.Navigate(f.srv.URL+"/q/"+dlq))
	waitFor(t, tab, "the queue page", `document.readyState === "complete" && document.querySelector("#messages") !== null`)
	fits := `document.documentElement.scrollWidth <= window.innerWidth`
	waitFor(t, tab, "the page to fit the window", fits)
	waitFor(t, tab, "reason and origin on screen", `Array.from(document.querySelectorAll("#messages tbody td.reason, #messages tbody td.origin")).every(function (td) { var r = td.getBoundingClientRect(); return r.width > 40 && r.right <= window.innerWidth; })`)
	waitFor(t, tab, "the long reason group cut", `document.querySelector("#groups").getBoundingClientRect().height < 300`)
	shot(t, tab, dir, "long-queue")
	for _, id := range ids {
		do(t, tab, "open a message", chromedp.Navigate(f.srv.URL+"/q/"+dlq+"/m/"+id))
		waitFor(t, tab, "the message page", `document.readyState === "complete" && document.querySelector("#envelope") !== null`)
		waitFor(t, tab, "the message page to fit the window", fits)
	}
	shot(t, tab, dir, "long-message")
}
