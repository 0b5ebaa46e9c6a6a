package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/acemq-go/acemq"
)

// A page on another port of the same host, opened by a signed-in operator
// (same-site, so the browser sends the console's cookie): 24 images
// pointing at a queue page read nothing (each is refused and audited),
// and a form it submits to /logout does not sign the operator out.
func TestBrowserAPageOnAnotherPortCanNeitherReadNorSignOut(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	deadLetter(t, f.conn, dlq, letter{reason: "boom"}, letter{reason: "boom"})
	target := f.srv.URL + "/q/" + url.PathEscape(dlq)
	var imgs strings.Builder
	for i := range 24 {
		fmt.Fprintf(&imgs, `<img src="%s?n=%d">`, target, i)
	}
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/imgs":
			fmt.Fprintf(w, `<!doctype html><title>imgs</title><p id=done>%s</p>`, imgs.String())
		case "/logout":
			fmt.Fprintf(w, `<!doctype html><title>out</title><form id=f method=post action="%s/logout"></form><script>document.getElementById("f").submit()</script>`, f.srv.URL)
		}
	}))
	t.Cleanup(evil.Close)
	tab := browser(t)
	f.signInBrowser(tab)
	do(t, tab, "open the other app's page of images", chromedp.Navigate(evil.URL+"/imgs"))
	waitFor(t, tab, "the images to load or fail", `document.readyState === "complete"`)
	do(t, tab, "open the other app's sign-out form", chromedp.Navigate(evil.URL+"/logout"))
	waitFor(t, tab, "the forged sign-out to be answered", `location.href.indexOf("/logout") >= 0 && document.readyState === "complete" && location.origin !== `+fmt.Sprintf("%q", evil.URL))
	do(t, tab, "back to the console", chromedp.Navigate(f.srv.URL+"/audit"))
	waitFor(t, tab, "still signed in", `document.querySelector("#audit") !== null && document.querySelector("#sign-out") !== null`)
	audit := text(t, tab, "#audit tbody")
	if n := strings.Count(audit, "Sec-Fetch-Mode: \"no-cors\""); n < 20 {
		t.Fatalf("%d image loads refused and audited, want the 24 (a browser may merge a few):\n%s", n, audit)
	}
	// The overview read the queue for its oldest message when the operator
	// signed in; no page read it.
	if strings.Count(audit, "read 2 of 2") != strings.Count(audit, "read 2 of 2 for the overview's oldest") {
		t.Fatalf("an image load read the queue:\n%s", audit)
	}
	if !strings.Contains(audit, "sign-out") || !strings.Contains(audit, "refused") {
		t.Fatalf("the forged sign-out is not audited as refused:\n%s", audit)
	}
	if d := depth(t, f.conn, dlq); d != 2 {
		t.Fatalf("%s holds %d, want 2", dlq, d)
	}
}
