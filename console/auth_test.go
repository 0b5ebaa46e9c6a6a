package console_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
)

// A form on another port of the same host (same-site: the browser sends
// the console's cookie with it) posting to /logout does not sign the
// operator out, and leaves the cookie alone; the refusal is audited. The
// console's own sign-out (with the session's CSRF token) does sign out.
// (Before: the refusal still cleared the cookie.)
func TestSignOutFromAnotherPortIsRefusedAndKeepsTheCookie(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	ck := f.sessionCookie()
	form := url.Values{}
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/logout", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://127.0.0.1:1")
	req.Header.Set("Sec-Fetch-Site", "same-site")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	req.Header.Set("Sec-Fetch-Dest", "document")
	req.AddCookie(ck)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-out from another port: %d, want 403", resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == ck.Name {
			t.Fatalf("the refused sign-out set the cookie %+v", c)
		}
	}
	if code := getWith(t, f.srv.URL+"/audit", ck); code != http.StatusOK {
		t.Fatalf("the session after a refused sign-out: %d", code)
	}
	// The same request from the console's page but without its CSRF token
	// is refused as well.
	if resp, _ := f.post("/logout", url.Values{"csrf": {"nope"}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-out without the CSRF token: %d", resp.StatusCode)
	}
	_, audit := f.get("/audit")
	if strings.Count(audit, "sign-out") < 2 || !strings.Contains(audit, "refused: the browser marks it Sec-Fetch-Site: same-site") {
		t.Fatalf("the refused sign-outs are not audited: %s", audit)
	}
	if resp, body := f.post("/logout", nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, "Signed out") {
		t.Fatalf("the console's own sign-out: %d", resp.StatusCode)
	}
	if code := getWith(t, f.srv.URL+"/audit", ck); code != http.StatusUnauthorized {
		t.Fatalf("the session after signing out: %d", code)
	}
}

// Wrong tokens are throttled: after a burst from one address every
// further try is answered 429 with Retry-After without being checked
// (the right token included, until the address slows down), through the
// form, the bearer header and one-time codes alike; each failure is
// audited, and so is the throttling. (Before: 1,100 guesses a second, no
// 429, nothing audited.)
func TestWrongTokensAreThrottledAndAudited(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	statuses := map[int]int{}
	for i := range 30 {
		var resp *http.Response
		var err error
		switch i % 3 {
		case 0:
			resp, err = anon.PostForm(f.srv.URL+"/login", url.Values{"token": {"guess-0123456789abcdef"}})
		case 1:
			req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/overview", nil)
			req.Header.Set("Authorization", "Bearer guess-0123456789abcdef")
			resp, err = anon.Do(req)
		default:
			resp, err = anon.PostForm(f.srv.URL+"/sign-in", url.Values{"code": {"00112233445566778899aabbccddeeff"}})
		}
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
	}
	if statuses[http.StatusUnauthorized] != 10 || statuses[http.StatusTooManyRequests] != 20 {
		t.Fatalf("30 wrong tries answered %v; want 10 checked (401) and 20 throttled (429)", statuses)
	}
	resp, err := anon.PostForm(f.srv.URL+"/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the right token from a throttled address: %d, want 429", resp.StatusCode)
	}
	// The operator's session, already open, is not affected.
	_, audit := f.get("/audit")
	for _, want := range []string{"failed: wrong token in the sign-in form", "failed: wrong bearer token", "failed: a sign-in code that is wrong", "throttled: too many failed sign-ins"} {
		if !strings.Contains(audit, want) {
			t.Fatalf("the audit log lacks %q", want)
		}
	}
}

// A token that looks guessable is refused at start, however long; a
// generated one and the tests' own are taken.
func TestNewRefusesAGuessableToken(t *testing.T) {
	c := connect(t, memURL(t))
	for _, weak := range []string{"passwordpassword", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "abababababababababababab"} {
		_, err := console.New(c, console.Config{URL: memURL(t), Token: weak})
		var ce *acemq.ConfigurationError
		if err == nil || !strings.Contains(err.Error(), "guessable") || !errors.As(err, &ce) {
			t.Fatalf("New with %q: %v", weak, err)
		}
	}
	gen, err := console.GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{gen, token} {
		if _, err := console.New(c, console.Config{URL: memURL(t), Token: ok}); err != nil {
			t.Fatalf("New with %q: %v", ok, err)
		}
	}
}
