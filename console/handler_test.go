package console_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
)

func TestEveryPageNeedsTheToken(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	ids := deadLetter(t, f.conn, dlq, letter{reason: "boom"})
	anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/", "/api/overview", "/audit", "/q/" + dlq, "/q/" + dlq + "/m/" + ids[0], "/q/" + dlq + "/m/" + ids[0] + "/raw"} {
		resp, err := anon.Get(f.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", p, resp.StatusCode)
		}
	}
	for _, p := range []string{"/q/" + dlq + "/replay", "/q/" + dlq + "/purge"} {
		resp, err := anon.PostForm(f.srv.URL+p, url.Values{"confirm": {"yes"}, "confirm_name": {dlq}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s without the token: %d, want 401", p, resp.StatusCode)
		}
	}
	if n := depth(t, f.conn, dlq); n != 1 {
		t.Fatalf("%s holds %d after refused actions, want 1", dlq, n)
	}
	// The token never goes in a URL: a request carrying it, right or
	// wrong, is refused and signs nobody in.
	for _, tok := range []string{token, "wrong-token-0123456789"} {
		resp, err := anon.Get(f.srv.URL + "/q/" + dlq + "?token=" + tok + "&page=1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || len(resp.Cookies()) != 0 {
			t.Fatalf("?token= in the URL: %d, cookies %v; want 400 and none", resp.StatusCode, resp.Cookies())
		}
	}
	// The sign-in form sets the cookie.
	resp, err := anon.PostForm(f.srv.URL+"/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || strings.Contains(loc, "token") {
		t.Fatalf("sign-in redirect: %d to %q", resp.StatusCode, loc)
	}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if strings.HasPrefix(c.Name, "acemq_console_") {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie %+v, want HttpOnly SameSite=Strict", ck)
	}
	// A bearer header works too.
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/overview", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = anon.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("bearer: %d", resp.StatusCode)
	}
}

func TestNewRefusesAShortToken(t *testing.T) {
	c := connect(t, memURL(t))
	if _, err := console.New(c, console.Config{URL: memURL(t), Token: "short"}); err == nil || !strings.Contains(err.Error(), "acemq: ") {
		t.Fatalf("New with a short token: %v", err)
	}
	tok, err := console.GenerateToken()
	if err != nil || len(tok) != 32 {
		t.Fatalf("GenerateToken: %q %v", tok, err)
	}
}

func TestEveryResponseCarriesAStrictContentSecurityPolicy(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	ids := deadLetter(t, f.conn, dlq, letter{reason: "boom"})
	for _, p := range []string{"/", "/audit", "/q/" + dlq, "/q/" + dlq + "/m/" + ids[0], "/static/console.js", "/nowhere"} {
		resp, body := f.get(p)
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: CSP %q", p, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("%s: headers %v", p, resp.Header)
		}
		if strings.Contains(resp.Header.Get("Content-Type"), "html") && (strings.Contains(body, "<script>") || strings.Contains(body, " style=") || strings.Contains(body, " onclick")) {
			t.Errorf("%s has inline script or style, which the CSP would block", p)
		}
	}
}

// The overview reports the same on memory:// and on RabbitMQ, whichever
// version: on RabbitMQ 4 with management_metrics_collection denied the
// management API gives no depths, and the overview reads them over AMQP.
func TestOverviewListsEverySetAsideQueueWithSourceDepthAndAge(t *testing.T) {
	forEachBroker(t, func(t *testing.T, u string) {
		f := newFixture(t, u, nil)
		q := seedQueue(t, f.conn)
		dlq := acemq.DeadLetterQueue(q)
		deadLetter(t, f.conn, dlq, letter{reason: "a"}, letter{reason: "b"}, letter{reason: "c"})
		resp, body := f.get("/")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		for _, want := range []string{`data-queue="` + dlq + `"`, `data-queue="` + acemq.ParkedQueue(q) + `"`, ">" + q + "<", `class="num depth">3<`, `data-poll="/api/overview"`} {
			if !strings.Contains(body, want) {
				t.Errorf("overview lacks %s", want)
			}
		}
		if strings.Contains(body, `data-queue="`+q+`"`) {
			t.Error("the overview lists the source queue as a dead-letter queue")
		}
		row := f.overviewJSON()[dlq]
		if row == nil || row["depth"].(float64) != 3 || row["source"] != q || row["kind"] != "dlq" || !strings.HasPrefix(row["oldest"].(string), "1h") {
			t.Fatalf("overview row %v", row)
		}
		if got := f.overviewJSON()[acemq.ParkedQueue(q)]; got == nil || got["kind"] != "parked" || got["depth"].(float64) != 0 {
			t.Fatalf("parked row %v", got)
		}
	})
}

func TestQueuePageGroupsReasonsPagesAndMarksDuplicates(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	var ls []letter
	for i := range 24 {
		switch {
		case i%2 == 0:
			ls = append(ls, letter{reason: "exhausted 6 attempts: timeout after " + []string{"30s", "12s"}[i%4/2], attempt: 6})
		case i%3 == 0:
			ls = append(ls, letter{reason: "the handler rejected it: bad sku"})
		default:
			ls = append(ls, letter{reason: "could not be decoded: unexpected EOF", typ: "OrderCancelled"})
		}
	}
	ls = append(ls, letter{id: "dup-1", reason: "x"}, letter{id: "dup-1", reason: "x"})
	deadLetter(t, f.conn, dlq, ls...)
	_, body := f.get("/q/" + dlq)
	for _, want := range []string{
		"exhausted N attempts: timeout after Ns</td><td class=\"num\">12<",
		"could not be decoded: unexpected EOF</td><td class=\"num\">8<",
		"the handler rejected it: bad sku</td><td class=\"num\">4<",
		"1 id(s) appear more than once",
		`id="matching">26<`,
		"Page 1 of 3",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("queue page lacks %q", want)
		}
	}
	_, p3 := f.get("/q/" + dlq + "?page=3")
	if strings.Count(p3, `class="duplicate"`) != 2 || !strings.Contains(p3, ">duplicate</span>") {
		t.Errorf("page 3 does not mark both copies of dup-1 as duplicates")
	}
	// Order is kept and nothing was taken.
	if n := depth(t, f.conn, dlq); n != 26 {
		t.Fatalf("%s holds %d after browsing, want 26", dlq, n)
	}
}

func TestQueuePageFiltersByExpressionAndByReasonGroup(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	deadLetter(t, f.conn, dlq,
		letter{reason: "timeout", typ: "OrderPlaced"}, letter{reason: "timeout", typ: "OrderCancelled"},
		letter{reason: "bad sku 12", typ: "OrderPlaced"}, letter{reason: "bad sku 99", typ: "OrderPlaced"})
	_, body := f.get("/q/" + dlq + "?filter=" + url.QueryEscape(`type == "OrderPlaced" && error ~ "timeout"`))
	if !strings.Contains(body, `id="matching">1<`) {
		t.Errorf("filtered page does not show 1 match")
	}
	_, body = f.get("/q/" + dlq + "?group=" + url.QueryEscape("bad sku N"))
	if !strings.Contains(body, `id="matching">2<`) || !strings.Contains(body, `id="group-shown">bad sku N<`) {
		t.Errorf("group page does not show the 2 bad-sku messages")
	}
	_, body = f.get("/q/" + dlq + "?filter=" + url.QueryEscape(`type = "x"`))
	if !strings.Contains(body, `id="filter-error"`) || !strings.Contains(body, "does not parse") || !strings.Contains(body, `id="matching">4<`) {
		t.Errorf("a bad filter is not reported (or the page does not fall back to every message)")
	}
}

func TestMessagePageShowsEnvelopeHeadersTraceLinkAndPrettyJSON(t *testing.T) {
	f := newFixture(t, memURL(t), func(c *console.Config) { c.TraceURL = "http://tracing.example/trace/{traceId}" })
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	ids := deadLetter(t, f.conn, dlq, letter{reason: "exhausted 3 attempts: boom", attempt: 3, body: []byte(`{"order":"o-1","lines":[1,2]}`),
		headers: map[string]any{"tenant": "acme", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	resp, body := f.get("/q/" + dlq + "/m/" + ids[0])
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	for _, want := range []string{ids[0], "OrderPlaced (v1)", "exhausted 3 attempts: boom", "orders-service@host-1",
		"<th>tenant</th><td><pre>acme</pre>", "x-acemq-attempt", `href="http://tracing.example/trace/4bf92f3577b34da6a3ce929d0e0e4736"`,
		"{\n  &#34;order&#34;: &#34;o-1&#34;,\n  &#34;lines&#34;: [\n    1,", ">json</span>"} {
		if !strings.Contains(body, want) {
			t.Errorf("message page lacks %q", want)
		}
	}
	resp, raw := f.get("/q/" + dlq + "/m/" + ids[0] + "/raw")
	if raw != `{"order":"o-1","lines":[1,2]}` || resp.Header.Get("Content-Type") != "application/octet-stream" || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("raw: %q %v", raw, resp.Header)
	}
	resp, _ = f.get("/q/" + dlq + "/m/no-such-id")
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("missing message: %d", resp.StatusCode)
	}
}

func TestAttackerControlledValuesRenderAsText(t *testing.T) {
	f := newFixture(t, memURL(t), func(c *console.Config) { c.TraceURL = "http://tracing.example/{traceId}" })
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	evil := `<script>alert("x")</script><img src=x onerror=alert(1)>`
	ids := deadLetter(t, f.conn, dlq, letter{
		id: `id-<script>alert(1)</script>`, typ: `Type<script>alert(2)</script>`, reason: "bad: " + evil,
		contentType: "text/plain", body: []byte(evil),
		headers: map[string]any{"x-note": evil, "traceparent": `00-"><script>alert(3)</script>-1-01`},
	})
	pages := []string{"/", "/q/" + dlq, "/q/" + dlq + "/m/" + url.PathEscape(ids[0])}
	for _, p := range pages {
		resp, body := f.get(p)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", p, resp.StatusCode)
		}
		if strings.Contains(body, "<script>") || strings.Contains(body, "<img") {
			t.Errorf("%s renders a raw <script> or <img> from a message", p)
		}
	}
	_, body := f.get(pages[2])
	if !strings.Contains(body, `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;`) {
		t.Errorf("the body is not shown as escaped text")
	}
	// A filter typed into the page is escaped where it is echoed.
	_, body = f.get("/q/" + dlq + "?filter=" + url.QueryEscape(`error ~ "</script><script>alert(4)</script>"`))
	if strings.Contains(body, "<script>alert(4)") {
		t.Error("the filter is echoed unescaped")
	}
}

func TestBodiesAreDecodedByTheirContentType(t *testing.T) {
	cases := []struct {
		ct   string
		body []byte
		kind string
		has  string
	}{
		{"application/json", []byte(`{"a":1}`), "json", "{\n  \"a\": 1\n}"},
		{"", []byte(`[1]`), "json", "[\n  1\n]"},
		{"text/plain; charset=utf-8", []byte("héllo"), "text", "héllo"},
		{"application/octet-stream", []byte{0, 1, 2, 0xff}, "binary", "00 01 02 ff"},
		{"application/vnd.acemq.encrypted", append([]byte{0xAE, 0x01, 7}, append([]byte("2026-01"), make([]byte, 30)...)...), "encrypted", `key id "2026-01"`},
		{"application/json", []byte(`{not json`), "binary", "7b 6e 6f 74"},
	}
	for _, c := range cases {
		kind, text := console.DecodeBody(c.ct, c.body)
		if kind != c.kind || !strings.Contains(text, c.has) {
			t.Errorf("%q %q: %s %q, want %s containing %q", c.ct, c.body, kind, text, c.kind, c.has)
		}
	}
	if g := console.ReasonGroup("exhausted 6 attempts: order 3f2b8c1e-8d6a-4e8e-9b1a-0c2d4e6f8a9b timed out after 30s"); g != "exhausted N attempts: order {id} timed out after Ns" {
		t.Errorf("ReasonGroup: %q", g)
	}
}

func TestReplayPreviewsThenMovesExactlyTheSelection(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	ids := deadLetter(t, f.conn, dlq, letter{reason: "timeout 1", attempt: 4}, letter{reason: "bad sku"}, letter{reason: "timeout 2", attempt: 4}, letter{reason: "bad sku"})
	// The preview says what will happen and does nothing.
	resp, body := f.post("/q/"+dlq+"/replay", url.Values{"group": {"timeout N"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="plan-count">2<`) || !strings.Contains(body, "to <b>"+q+"</b>") {
		t.Fatalf("preview: %d %s", resp.StatusCode, body)
	}
	if n := depth(t, f.conn, dlq); n != 4 {
		t.Fatalf("the preview moved messages: %d left", n)
	}
	resp, body = f.post("/q/"+dlq+"/replay", url.Values{"group": {"timeout N"}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "moved 2, skipped 2 (drained)") {
		t.Fatalf("replay: %d %s", resp.StatusCode, body)
	}
	if got := drainIDs(t, f.conn, q); !slices.Equal(got, []string{ids[0], ids[2]}) {
		t.Fatalf("%s received %v, want %v", q, got, []string{ids[0], ids[2]})
	}
	// Selected ids, keeping attempts.
	resp, body = f.post("/q/"+dlq+"/replay", url.Values{"id": {ids[3]}, "keep": {"on"}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "moved 1, skipped 1") {
		t.Fatalf("replay one: %d %s", resp.StatusCode, body)
	}
	ctx := t.Context()
	p, _ := f.conn.NewPuller(ctx)
	defer p.Close()
	m, ok, err := p.Pull(ctx, q)
	if err != nil || !ok || m.Envelope.ID != ids[3] || m.Envelope.Error != "bad sku" {
		t.Fatalf("kept-attempts replay: %v %v %+v", ok, err, m)
	}
	// The audit log has both, with the client's address.
	_, audit := f.get("/audit")
	if strings.Count(audit, "<td>replay</td>") != 2 || !strings.Contains(audit, "group <code>timeout N</code>") || !strings.Contains(audit, "127.0.0.1:") {
		t.Fatalf("audit log: %s", audit)
	}
}

func TestReplayIntoAMissingQueueMovesNothing(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	deadLetter(t, f.conn, dlq, letter{reason: "x"})
	if _, err := f.conn.DeleteQueue(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	resp, body := f.post("/q/"+dlq+"/replay", url.Values{"confirm": {"yes"}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "Nothing was moved") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if n := depth(t, f.conn, dlq); n != 1 {
		t.Fatalf("%d left", n)
	}
}

func TestParkMovesToTheParkedQueueKeepingTheReason(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	ids := deadLetter(t, f.conn, dlq, letter{reason: "poison", attempt: 5}, letter{reason: "other"})
	resp, body := f.post("/q/"+dlq+"/park", url.Values{"filter": {`error == "poison"`}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "moved 1, skipped 1") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	ctx := t.Context()
	p, _ := f.conn.NewPuller(ctx)
	defer p.Close()
	m, ok, err := p.Pull(ctx, acemq.ParkedQueue(q))
	if err != nil || !ok || m.Envelope.ID != ids[0] || m.Envelope.Error != "poison" || m.Envelope.Attempt != 5 {
		t.Fatalf("parked: %v %v %+v", ok, err, m)
	}
	if resp, _ := f.post("/q/"+acemq.ParkedQueue(q)+"/park", url.Values{"confirm": {"yes"}}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("park from .parked: %d", resp.StatusCode)
	}
}

func TestPurgeNeedsTheQueueNameTyped(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	deadLetter(t, f.conn, dlq, letter{reason: "x"}, letter{reason: "y"})
	for _, typed := range []string{"", q, dlq + " ", "yes"} {
		resp, body := f.post("/q/"+dlq+"/purge", url.Values{"confirm_name": {typed}})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "deletes the <b>2</b> message(s)") {
			t.Fatalf("purge with %q typed: %d %s", typed, resp.StatusCode, body)
		}
	}
	if n := depth(t, f.conn, dlq); n != 2 {
		t.Fatalf("%d left after unconfirmed purges", n)
	}
	resp, body := f.post("/q/"+dlq+"/purge", url.Values{"confirm_name": {dlq}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "purged 2 message(s) from "+dlq) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if n := depth(t, f.conn, dlq); n != 0 {
		t.Fatalf("%d left after the purge", n)
	}
	if _, audit := f.get("/audit"); !strings.Contains(audit, "<td>purge</td>") || !strings.Contains(audit, "purged 2") {
		t.Fatal("the purge is not in the audit log")
	}
}

func TestDownloadSendsTheSelectionAsJSONLines(t *testing.T) {
	f := newFixture(t, memURL(t), func(c *console.Config) { c.ScanLimit = 2 }) // the download reads past the page's limit
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	ids := deadLetter(t, f.conn, dlq, letter{reason: "a"}, letter{reason: "b"}, letter{reason: "a"}, letter{reason: "a", contentType: "application/octet-stream", body: []byte{0xff, 0}})
	resp, body := f.post("/q/"+dlq+"/download", url.Values{"filter": {`error == "a"`}})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	var got []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		got = append(got, m["id"].(string))
		if m["id"] == ids[3] && m["bodyBase64"] != "/wA=" {
			t.Fatalf("binary body: %v", m)
		}
	}
	if !slices.Equal(got, []string{ids[0], ids[2], ids[3]}) {
		t.Fatalf("downloaded %v", got)
	}
	if n := depth(t, f.conn, dlq); n != 4 {
		t.Fatalf("%d left after a download", n)
	}
}

func TestActionsWithoutTheCSRFTokenAreRefused(t *testing.T) {
	f := newFixture(t, memURL(t), nil)
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	deadLetter(t, f.conn, dlq, letter{reason: "x"})
	for _, p := range []string{"/replay", "/park", "/purge", "/download"} {
		for _, csrf := range []string{"", "deadbeef"} {
			resp, _ := f.post("/q/"+dlq+p, url.Values{"csrf": {csrf}, "confirm": {"yes"}, "confirm_name": {dlq}})
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("POST %s with csrf %q: %d, want 403", p, csrf, resp.StatusCode)
			}
		}
		// The right token from another origin is refused too.
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/q/"+dlq+p, strings.NewReader(url.Values{"csrf": {f.csrfToken()}, "confirm": {"yes"}, "confirm_name": {dlq}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://evil.example")
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s from another origin: %d, want 403", p, resp.StatusCode)
		}
		req, _ = http.NewRequest(http.MethodPost, f.srv.URL+"/q/"+dlq+p, strings.NewReader(url.Values{"csrf": {f.csrfToken()}, "confirm": {"yes"}, "confirm_name": {dlq}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		resp, err = f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s marked cross-site: %d, want 403", p, resp.StatusCode)
		}
		// A GET never acts.
		if resp, _ := f.get("/q/" + dlq + p + "?confirm=yes&confirm_name=" + dlq); resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET %s: %d, want 405", p, resp.StatusCode)
		}
	}
	if n := depth(t, f.conn, dlq); n != 1 {
		t.Fatalf("%d left after refused actions, want 1", n)
	}
	if _, audit := f.get("/audit"); !strings.Contains(audit, "refused: missing or wrong CSRF token") {
		t.Fatal("refusals are not in the audit log")
	}
}

func TestReadOnlyHidesAndRefusesEveryAction(t *testing.T) {
	u := memURL(t)
	writable := newFixture(t, u, nil)
	csrf := writable.csrfToken()
	f := newFixture(t, u, func(c *console.Config) { c.ReadOnly = true })
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	ids := deadLetter(t, f.conn, dlq, letter{reason: "x"})
	for _, p := range []string{"/", "/q/" + dlq, "/q/" + dlq + "/m/" + ids[0]} {
		_, body := f.get(p)
		// Signing out is not an action on the broker.
		body = signOutRE.ReplaceAllString(body, "")
		if !strings.Contains(body, `id="read-only"`) {
			t.Errorf("%s does not say it is read-only", p)
		}
		for _, action := range []string{"/replay", "/park", "/purge", "/download", `method="post"`, `csrf`} {
			if strings.Contains(body, action) {
				t.Errorf("read-only %s shows %s", p, action)
			}
		}
	}
	for _, p := range []string{"/replay", "/park", "/purge", "/download"} {
		resp, body := f.post("/q/"+dlq+p, url.Values{"csrf": {csrf}, "confirm": {"yes"}, "confirm_name": {dlq}})
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "read-only") {
			t.Errorf("read-only POST %s: %d", p, resp.StatusCode)
		}
	}
	if n := depth(t, f.conn, dlq); n != 1 {
		t.Fatalf("%d left, want 1", n)
	}
}

var signOutRE = regexp.MustCompile(`<form class="signout" method="post" action="/logout">.*?</form>`)

func TestBrokerCredentialsNeverReachThePage(t *testing.T) {
	u := memURL(t)
	c := connect(t, u)
	con, err := console.New(c, console.Config{URL: "amqp://ops:s3cr3t-pw@127.0.0.1:1/", ManagementURL: "http://ops:s3cr3t-pw@127.0.0.1:1/", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/api/overview"} {
		req, _ := http.NewRequest(http.MethodGet, p, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := newRecorder()
		con.ServeHTTP(rec, req)
		body := rec.Body.String()
		if !strings.Contains(body, "management API") {
			t.Fatalf("%s does not report the failed listing: %s", p, body)
		}
		if strings.Contains(body, "s3cr3t-pw") {
			t.Fatalf("%s shows the broker password: %s", p, body)
		}
	}
}
