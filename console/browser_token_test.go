package console_test

import (
	"bytes"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The credential is never left in the browser: the one-time link the
// console prints is opened in Chromium with a profile of its own; then
// the browser is closed (it writes its History, Top Sites and Sessions
// as it exits) and no file of the profile holds the token, while History
// does hold the console's address, so it was written. The link's code
// was spent by that one use. (Before: the ?token= link left the token in
// History, Top Sites and Sessions.)
func TestBrowserTheTokenIsNotLeftInTheBrowsersProfile(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	profile := t.TempDir()
	tab := browserIn(t, profile)
	link := f.signInLink()
	code := link[strings.Index(link, "#code=")+len("#code="):]
	do(t, tab, "open the printed link", chromedp.Navigate(link))
	waitFor(t, tab, "the overview after signing in", `document.querySelector("#overview") !== null`)
	do(t, tab, "open the audit page", chromedp.Navigate(f.srv.URL+"/audit"))
	waitFor(t, tab, "the audit page", `document.querySelector("#audit") !== null`)
	if err := chromedp.Cancel(tab); err != nil { // closes the browser, which saves its files
		t.Fatal(err)
	}
	host := strings.TrimPrefix(f.srv.URL, "http://")
	sawHistory := false
	err := filepath.WalkDir(profile, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // a socket or lock file
		}
		if bytes.Contains(b, []byte(token)) {
			t.Errorf("%s holds the token", strings.TrimPrefix(path, profile))
		}
		if filepath.Base(path) == "History" && bytes.Contains(b, []byte(host)) {
			sawHistory = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sawHistory {
		t.Fatalf("Chromium's History does not hold %s: the test did not see a history written", host)
	}
	// The code in the link was spent by the browser's one use.
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).PostForm(f.srv.URL+"/sign-in", url.Values{"code": {code}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the link's code a second time: %d, want 401", resp.StatusCode)
	}
}
