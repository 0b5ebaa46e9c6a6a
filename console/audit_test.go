package console_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
)

// syncBuffer is an audit writer the test can read while the console writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) entries(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// Viewing a message and downloading its raw body are audited.
func TestReadingAMessageIsAudited(t *testing.T) {
	var audit syncBuffer
	f := newFixture(t, memURL(t), func(c *console.Config) { c.Audit = &audit })
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	ids := deadLetter(t, f.conn, dlq, letter{reason: "x"})
	f.get("/q/" + dlq + "/m/" + ids[0])
	f.get("/q/" + dlq + "/m/" + ids[0] + "/raw")
	var got []string
	for _, e := range audit.entries(t) {
		if e["id"] == ids[0] && e["queue"] == dlq {
			got = append(got, e["action"].(string))
		}
	}
	if strings.Join(got, ",") != "view,raw" {
		t.Fatalf("audited reads %v, want view,raw", got)
	}
	if _, page := f.get("/audit"); !strings.Contains(page, "<td>view</td>") || !strings.Contains(page, "<td>raw</td>") {
		t.Fatal("the audit page does not show the reads")
	}
}

// The identity a trusted proxy sends is recorded; the same header from
// anyone else is not.
func TestAuditRecordsTheUserFromATrustedProxyOnly(t *testing.T) {
	for _, c := range []struct {
		trusted []string
		want    string
	}{{[]string{"127.0.0.1"}, "alice@example.com"}, {[]string{"10.0.0.0/8"}, ""}} {
		var audit syncBuffer
		f := newFixture(t, memURL(t), func(cfg *console.Config) {
			cfg.Audit = &audit
			cfg.IdentityHeader = "X-Forwarded-User"
			cfg.TrustedProxies = c.trusted
		})
		q := seedQueue(t, f.conn)
		dlq := acemq.DeadLetterQueue(q)
		ids := deadLetter(t, f.conn, dlq, letter{reason: "x"})
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/q/"+dlq+"/m/"+ids[0], nil)
		req.Header.Set("X-Forwarded-User", "alice@example.com")
		req.Header.Set("X-Forwarded-For", "192.0.2.7")
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		es := audit.entries(t)
		e := es[len(es)-1]
		user, _ := e["user"].(string)
		if user != c.want {
			t.Errorf("trusted %v: user %q, want %q", c.trusted, user, c.want)
		}
		client, _ := e["client"].(string)
		if c.want != "" && !strings.HasPrefix(client, "192.0.2.7 via 127.0.0.1:") {
			t.Errorf("trusted proxy: client %q, want the forwarded address via the proxy", client)
		}
		if c.want == "" && strings.Contains(client, "192.0.2.7") {
			t.Errorf("untrusted: client %q believes X-Forwarded-For", client)
		}
	}
	c := connect(t, memURL(t))
	if _, err := console.New(c, console.Config{URL: memURL(t), Token: token, IdentityHeader: "X-Forwarded-User"}); err == nil || !strings.Contains(err.Error(), "TrustedProxies") {
		t.Fatalf("an identity header with no trusted proxy: %v", err)
	}
}

// The right CSRF token from the wrong origin is logged as that, not as a
// missing token.
func TestAuditRecordsWhyARequestWasRefused(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/q/"+dlq+"/replay", strings.NewReader(url.Values{"csrf": {f.csrfToken()}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_, page := f.get("/audit")
	if resp.StatusCode != http.StatusForbidden || strings.Contains(page, "missing or wrong CSRF token") || !strings.Contains(page, "its Origin &#34;http://evil.example&#34; is not") {
		t.Fatalf("%d; audit: %s", resp.StatusCode, page)
	}
}
