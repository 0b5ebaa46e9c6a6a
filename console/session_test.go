package console_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
)

// sessionCookie is the console's cookie in f's jar.
func (f *fixture) sessionCookie() *http.Cookie {
	f.t.Helper()
	u, _ := url.Parse(f.srv.URL)
	for _, c := range f.client.Jar.Cookies(u) {
		if strings.HasPrefix(c.Name, "acemq_console_") {
			return c
		}
	}
	f.t.Fatal("no console cookie in the jar")
	return nil
}

// getWith sends one GET carrying only the given cookie.
func getWith(t *testing.T, rawURL string, ck *http.Cookie) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, rawURL, nil)
	req.AddCookie(ck)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The cookie carries a random session, not the token; the CSRF token is
// the session's, not derived from the token; signing out ends the session
// for every copy of the cookie.
func TestTheCookieCarriesARevocableSessionNotTheToken(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	ck := f.sessionCookie()
	if strings.Contains(ck.Value, token) || ck.Value == token {
		t.Fatalf("the cookie carries the token: %s=%s", ck.Name, ck.Value)
	}
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("acemq-console-csrf"))
	if old := hex.EncodeToString(m.Sum(nil)); f.csrfToken() == old {
		t.Fatal("the CSRF token is derived from the long-lived token")
	}
	// A second sign-in gets another session and another CSRF token.
	g := &fixture{t: t, srv: f.srv, client: &http.Client{Jar: mustJar()}}
	g.signIn()
	if g.sessionCookie().Value == ck.Value || g.csrfToken() == f.csrfToken() {
		t.Fatal("two sign-ins share a session")
	}
	// A copy of the cookie works until the session ends.
	if code := getWith(t, f.srv.URL+"/audit", ck); code != http.StatusOK {
		t.Fatalf("a copy of the cookie: %d", code)
	}
	resp, body := f.post("/logout", url.Values{})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Signed out") {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	if code := getWith(t, f.srv.URL+"/audit", ck); code != http.StatusUnauthorized {
		t.Fatalf("the cookie still works after sign-out: %d", code)
	}
	if resp, _ := g.get("/audit"); resp.StatusCode != http.StatusOK {
		t.Fatalf("signing one browser out signed the other out too: %d", resp.StatusCode)
	}
}

func mustJar() http.CookieJar {
	j, _ := cookiejar.New(nil)
	return j
}

func TestASessionExpires(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := newFixture(t, memURL(t), func(c *console.Config) { c.SessionTTL = time.Hour })
	f.con.SetClock(clock)
	f.signIn()
	ck := f.sessionCookie()
	if ck.MaxAge != 0 && ck.MaxAge > 3600 {
		t.Fatalf("cookie Max-Age %d, want at most the session's hour", ck.MaxAge)
	}
	mu.Lock()
	now = now.Add(59 * time.Minute)
	mu.Unlock()
	if code := getWith(t, f.srv.URL+"/audit", ck); code != http.StatusOK {
		t.Fatalf("within the hour: %d", code)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if code := getWith(t, f.srv.URL+"/audit", ck); code != http.StatusUnauthorized {
		t.Fatalf("after the hour: %d, want 401", code)
	}
}

// Two consoles on one host (cookies ignore the port) do not share a
// cookie name, so signing in to one does not sign the other out.
func TestTwoConsolesOnOneHostKeepTheirOwnSessions(t *testing.T) {
	u := memURL(t)
	a := newFixture(t, u, nil)
	b := newFixture(t, u, nil)
	if a.sessionCookie().Name == b.sessionCookie().Name {
		t.Fatalf("both consoles use the cookie %s", a.sessionCookie().Name)
	}
	// One browser (one jar for the host) signs in to both.
	jar := mustJar()
	ca := &fixture{t: t, srv: a.srv, client: &http.Client{Jar: jar}}
	cb := &fixture{t: t, srv: b.srv, client: &http.Client{Jar: jar}}
	ca.signIn()
	cb.signIn()
	if resp, _ := ca.get("/audit"); resp.StatusCode != http.StatusOK {
		t.Fatalf("signing in to the second console signed the first out: %d", resp.StatusCode)
	}
}

// Scripts: Authorization: Bearer in any case of the scheme; an
// unauthenticated /api/ request answers JSON; an action with the bearer
// token needs no CSRF token (a browser never sends the header by itself).
func TestBearerTokenForScripts(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	deadLetter(t, f.conn, dlq, letter{reason: "x"})
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/overview", nil)
		req.Header.Set("Authorization", scheme+" "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Authorization: %s: %d", scheme, resp.StatusCode)
		}
	}
	resp, err := http.Get(f.srv.URL + "/api/overview")
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 512)
	n, _ := resp.Body.Read(b)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !strings.HasPrefix(string(b[:n]), `{"error":`) {
		t.Fatalf("unauthenticated /api/overview: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b[:n])
	}
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/q/"+dlq+"/download", strings.NewReader(""))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("download with the bearer token: %d", resp.StatusCode)
	}
}
