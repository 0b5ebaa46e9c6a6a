package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
	"github.com/acemq-go/acemq/console/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "test-token-0123456789abcdef"

// fixture is a console on a broker, served by httptest, and a client that
// has signed in.
type fixture struct {
	t      *testing.T
	url    string
	conn   *acemq.Conn
	con    *console.Console
	srv    *httptest.Server
	client *http.Client
	csrf   string
}

func memURL(t *testing.T) string {
	return "memory://" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
}

func connect(t *testing.T, u string) *acemq.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, u, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func newFixture(t *testing.T, u string, edit func(*console.Config)) *fixture {
	t.Helper()
	c := connect(t, u)
	cfg := console.Config{URL: u, Token: token, PageSize: 10}
	if mgmt := mgmtURL(u); mgmt != "" {
		cfg.ManagementURL = mgmt
	}
	if edit != nil {
		edit(&cfg)
	}
	con, err := console.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	f := &fixture{t: t, url: u, conn: c, con: con, srv: srv, client: &http.Client{Jar: jar, Timeout: time.Minute}}
	f.signIn()
	return f
}

// signIn signs f's client in with the sign-in form. The console then
// sends it to the overview; the client stops at the redirect, since the
// overview would read every .dlq on the shared test broker.
func (f *fixture) signIn() {
	f.t.Helper()
	noFollow := *f.client
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.PostForm(f.srv.URL+"/login", url.Values{"token": {token}})
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		f.t.Fatalf("signing in: %d", resp.StatusCode)
	}
}

// signInBrowser signs tab in to f's console with a one-time link and
// waits for the overview it lands on.
func (f *fixture) signInBrowser(tab context.Context) {
	f.t.Helper()
	do(f.t, tab, "sign in with a one-time link", chromedp.Navigate(f.signInLink()))
	waitFor(f.t, tab, "the overview after signing in", `document.querySelector("#overview") !== null`)
}

// signInLink is a one-time sign-in link to f's console.
func (f *fixture) signInLink() string {
	f.t.Helper()
	l, err := f.con.SignInLink()
	if err != nil {
		f.t.Fatal(err)
	}
	return f.srv.URL + l
}

// mgmtURL is the management API of the test RabbitMQ node, for a URL on it.
func mgmtURL(u string) string {
	if strings.HasPrefix(u, "memory://") {
		return ""
	}
	return os.Getenv("ACEMQ_TEST_MANAGEMENT_URL")
}

func (f *fixture) get(path string) (*http.Response, string) {
	f.t.Helper()
	resp, err := f.client.Get(f.srv.URL + path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// post sends a form with the page's CSRF token (unless form sets csrf).
func (f *fixture) post(path string, form url.Values) (*http.Response, string) {
	f.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", f.csrfToken())
	}
	resp, err := f.client.PostForm(f.srv.URL+path, form)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfRE = regexp.MustCompile(`name="acemq-csrf" content="([0-9a-f]+)"`)

// csrfToken reads the CSRF token from a page, as a browser's form has it.
func (f *fixture) csrfToken() string {
	if f.csrf == "" {
		_, body := f.get("/audit")
		m := csrfRE.FindStringSubmatch(body)
		if m == nil {
			// Read-only pages carry no forms; the token is the one a
			// writable console would have served.
			return "0000"
		}
		f.csrf = m[1]
	}
	return f.csrf
}

// seedQueue declares q with its dead-letter half and returns q.
func seedQueue(t *testing.T, c *acemq.Conn) string {
	t.Helper()
	ctx := context.Background()
	q := testenv.Unique("console.orders")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic}).DeadLetters(q)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
			_, _ = c.DeleteQueue(context.Background(), name)
		}
	})
	return q
}

// letter is one dead letter to put in a queue.
type letter struct {
	id, typ, reason, contentType string
	body                         []byte
	headers                      map[string]any
	attempt                      int
}

// deadLetter publishes ls into queue as dead-lettered copies (attempt,
// reason and first-seen an hour ago) and returns their ids.
func deadLetter(t *testing.T, c *acemq.Conn, queue string, ls ...letter) []string {
	t.Helper()
	ids := make([]string, len(ls))
	for i, l := range ls {
		env := acemq.NewEnvelope()
		if l.id != "" {
			env.ID = l.id
		}
		env.Type = l.typ
		if env.Type == "" {
			env.Type = "OrderPlaced"
		}
		env.Attempt = max(l.attempt, 1)
		env.Error = l.reason
		env.Origin = "orders-service@host-1"
		env.FirstSeen = env.FirstSeen.Add(-time.Hour)
		for k, v := range l.headers {
			env, _ = env.WithHeader(k, v)
		}
		ct := l.contentType
		if ct == "" {
			ct = "application/json"
		}
		body := l.body
		if body == nil {
			body = []byte(fmt.Sprintf(`{"order":"o-%d","cents":%d}`, i, 100*i))
		}
		err := c.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: queue, ContentType: ct, MessageID: env.ID, Headers: env.WireHeaders(), Body: body})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = env.ID
	}
	return ids
}

func depth(t *testing.T, c *acemq.Conn, queue string) int {
	t.Helper()
	info, err := c.QueueInfo(context.Background(), queue)
	if err != nil {
		t.Fatal(err)
	}
	return info.Messages
}

// drainIDs takes every message from queue (acking it) and returns the ids
// in order.
func drainIDs(t *testing.T, c *acemq.Conn, queue string) []string {
	t.Helper()
	ctx := context.Background()
	p, err := c.NewPuller(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var ids []string
	for {
		m, ok, err := p.Pull(ctx, queue)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return ids
		}
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.Envelope.ID)
	}
}

// overviewJSON reads /api/overview.
func (f *fixture) overviewJSON() map[string]map[string]any {
	f.t.Helper()
	_, body := f.get("/api/overview")
	var out struct {
		Queues []map[string]any `json:"queues"`
		Error  string           `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		f.t.Fatalf("%v: %s", err, body)
	}
	if out.Error != "" {
		f.t.Fatalf("overview error: %s", out.Error)
	}
	m := map[string]map[string]any{}
	for _, q := range out.Queues {
		m[q["name"].(string)] = q
	}
	return m
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }
