package console

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/acemq-go/acemq/console/internal/queuelist"
	"github.com/acemq-go/acemq/console/internal/safetext"
	"github.com/acemq-go/acemq/replay"
	"github.com/acemq-go/acemq/transport"
)

//go:embed assets
var assets embed.FS

// view is what every page template gets: the console's settings and the
// page's own data.
type view struct {
	Title    string
	Base     string
	CSRF     string // the session's CSRF token ("" with a bearer token)
	ReadOnly bool
	SignedIn bool // with a session cookie: the page offers sign-out
	Data     any
}

func parsePages(cfg Config) (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"q":       func(name string) string { return url.PathEscape(name) },
		"line":    safetext.Line,
		"mark":    func(s string) template.HTML { return marked(s, 0) },
		"clip":    clip,
		"age":     func(t time.Time) string { return ageSince(t) },
		"percent": func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
		"query":   func(kv ...string) string { return queryString(kv...) },
		"add1":    func(n int) int { return n + 1 },
		"sub1":    func(n int) int { return n - 1 },
	}
	pages := map[string]*template.Template{}
	names, err := fs.Glob(assets, "assets/templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		base := strings.TrimSuffix(n[len("assets/templates/"):], ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("acemq: the console's page templates do not parse (%v); this is a bug in the console", err)
		}
		pages[base] = t
	}
	return pages, nil
}

func queryString(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" && (kv[i] != "page" || kv[i+1] != "1") {
			v.Set(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

func ageSince(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return age(time.Since(t))
}

func (c *Console) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets/static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("POST /login", c.login)
	m.HandleFunc("GET /sign-in", c.signInPage)
	m.HandleFunc("POST /sign-in", c.signInWithCode)
	m.HandleFunc("POST /logout", c.logout)
	m.HandleFunc("GET /{$}", c.guard(c.serveOverview))
	m.HandleFunc("GET /api/overview", c.guard(c.serveOverviewJSON))
	m.HandleFunc("GET /audit", c.guard(c.serveAudit))
	m.HandleFunc("GET /q/{queue}", c.guard(c.scoped(c.serveQueue)))
	m.HandleFunc("GET /q/{queue}/m/{id}", c.guard(c.scoped(c.serveMessage)))
	m.HandleFunc("GET /q/{queue}/m/{id}/raw", c.guard(c.scoped(c.serveRaw)))
	// The same reads, asked for with "Read anyway" where a read counts
	// deliveries (readAnyway: POST, CSRF, audited, never read-only).
	m.HandleFunc("POST /q/{queue}", c.guard(c.scoped(c.readAnyway(c.serveQueue))))
	m.HandleFunc("POST /q/{queue}/m/{id}", c.guard(c.scoped(c.readAnyway(c.serveMessage))))
	m.HandleFunc("POST /q/{queue}/m/{id}/raw", c.guard(c.scoped(c.readAnyway(c.serveRaw))))
	m.HandleFunc("/q/{queue}/replay", c.action("replay", c.replayAction))
	m.HandleFunc("/q/{queue}/park", c.action("park", c.parkAction))
	m.HandleFunc("/q/{queue}/purge", c.action("purge", c.purgeAction))
	m.HandleFunc("/q/{queue}/download", c.action("download", c.downloadAction))
	m.HandleFunc("/q/{queue}/", c.guard(c.scoped(func(w http.ResponseWriter, r *http.Request) {
		c.errorPage(w, r, http.StatusNotFound, "There is no such page; start from the overview.")
	})))
	m.HandleFunc("/", c.guard(func(w http.ResponseWriter, r *http.Request) {
		c.errorPage(w, r, http.StatusNotFound, "There is no such page; start from the overview.")
	}))
	c.mux = m
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page, title string, data any) {
	t, ok := c.pages[page]
	if !ok {
		http.Error(w, "acemq: the console has no page "+page, http.StatusInternalServerError)
		return
	}
	var buf strings.Builder
	if err := t.Execute(&buf, view{Title: title, Base: c.cfg.BasePath, CSRF: authOf(r).csrf, ReadOnly: c.cfg.ReadOnly, SignedIn: authOf(r).session != "", Data: data}); err != nil {
		http.Error(w, "acemq: the console could not render "+page+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}

func (c *Console) errorPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", http.StatusText(status), struct {
		Status  int
		Message string
	}{status, safetext.Line(msg)}) // a sentence may quote a request or a message
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "login", "Sign in", struct {
		Message string
		Problem bool // the message is an error, not a notice
	}{safetext.Line(msg), status != http.StatusOK})
}

// brokerError turns a failure to read a queue into a page.
func (c *Console) brokerError(w http.ResponseWriter, r *http.Request, queue string, err error) {
	if transport.Code(err) == transport.CodeNotFound {
		c.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("Queue %s does not exist on the broker; the overview lists the dead-letter queues.", quote(queue)))
		return
	}
	var unknown *replay.CountUnknownError
	if errors.As(err, &unknown) {
		c.errorPage(w, r, http.StatusServiceUnavailable, fmt.Sprintf("The count of %s is unknown: %s. Nothing was read; reload this page in a few seconds.", quote(queue), strings.TrimSuffix(safetext.Line(unknown.Why), ".")))
		return
	}
	c.errorPage(w, r, http.StatusBadGateway, fmt.Sprintf("Cannot read %s from the broker (%s). Check that the broker is up and reachable from the console; the console reconnects by itself, so reload this page once it is back.", quote(queue), strings.TrimPrefix(safetext.Line(err.Error()), "acemq: ")))
}

func (c *Console) serveOverview(w http.ResponseWriter, r *http.Request) {
	rows, err := c.overview(r.Context(), r)
	data := struct {
		Rows   []overviewRow
		Error  string
		Broker string
	}{Rows: rows, Broker: c.broker}
	if err != nil {
		data.Error = listError(err)
	}
	c.render(w, r, http.StatusOK, "overview", "Dead letters", data)
}

func (c *Console) serveOverviewJSON(w http.ResponseWriter, r *http.Request) {
	rows, err := c.overview(r.Context(), r)
	out := struct {
		Queues []overviewRow `json:"queues"`
		Error  string        `json:"error,omitempty"`
		Broker string        `json:"broker,omitempty"`
	}{Queues: rows, Broker: c.broker}
	if out.Queues == nil {
		out.Queues = []overviewRow{}
	}
	if err != nil {
		out.Error = listError(err)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// listError says that the queues could not be listed, so nothing is known
// about them (not that there are none), and what to do.
func listError(err error) string {
	return "The dead-letter queues are unknown: " + strings.TrimPrefix(safetext.Line(err.Error()), "acemq: ") + ". This is not \"no dead letters\": fix the listing (the page refreshes every 2 seconds)."
}

func (c *Console) serveAudit(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "audit", "Audit log", c.audit.newestFirst())
}

// selectionOf reads a selection from a request's query or form.
func selectionOf(r *http.Request) selection {
	_ = r.ParseForm()
	s := selection{Filter: strings.TrimSpace(r.Form.Get("filter")), Group: r.Form.Get("group")}
	for _, id := range r.Form["id"] {
		if id = strings.TrimSpace(id); id != "" {
			s.IDs = append(s.IDs, id)
		}
	}
	return s
}

// queuePage is the queue page's data.
type queuePage struct {
	Queue, Source, Parked string
	IsDLQ                 bool
	Sel                   selection
	FilterError           string
	Scan                  scan
	Rows                  []row
	Page, Pages           int
	Help                  string
	OtherSelected         bool // the selected group is one of the "other reasons"
}

func (c *Console) serveQueue(w http.ResponseWriter, r *http.Request) {
	queue := r.PathValue("queue")
	sel := selectionOf(r)
	p := queuePage{Queue: queue, Source: replay.SourceOf(queue), Sel: sel, Help: replay.FilterHelp,
		IsDLQ: strings.HasSuffix(queue, ".dlq"), Parked: replay.SourceOf(queue) + ".parked"}
	if _, err := replay.ParseFilter(sel.Filter); err != nil {
		p.FilterError = safetext.Line(err.Error())
		sel.Filter = ""
	}
	unsafe := readAnywayAsked(r)
	sc, err := c.read(r.Context(), queue, sel, unsafe)
	if c.refusedRead(w, r, queue, "read", err) {
		return
	}
	if err != nil {
		c.audit.add(r, auditEntry{Action: "read", Queue: queue, Filter: sel.Filter, Group: sel.Group, Result: "failed: " + strings.TrimPrefix(err.Error(), "acemq: ")})
		c.brokerError(w, r, queue, err)
		return
	}
	c.audit.add(r, auditEntry{Action: "read", Queue: queue, Filter: sel.Filter, Group: sel.Group, Result: readResult(sc.Read, sc.Depth, unsafe)})
	p.Scan = sc
	for _, g := range sc.Rest {
		p.OtherSelected = p.OtherSelected || g.Key == sel.Group
	}
	size := c.cfg.PageSize
	p.Pages = max(1, (len(sc.Matching)+size-1)/size)
	p.Page, _ = strconv.Atoi(r.Form.Get("page"))
	p.Page = min(max(p.Page, 1), p.Pages)
	lo := (p.Page - 1) * size
	p.Rows = sc.Matching[min(lo, len(sc.Matching)):min(lo+size, len(sc.Matching))]
	c.render(w, r, http.StatusOK, "queue", safetext.Line(queue), p)
}

// messagePage is the message page's data; every text from the message is
// escaped by the one rule (safetext).
type messagePage struct {
	Queue   string
	IsDLQ   bool
	Msg     *message
	Fields  shownEnvelope
	History []event
	Headers []headerLine
	Body    body
	Read    int
}

// shownEnvelope is a message's envelope and properties as the page shows
// them: escaped by the one rule with the escapes marked, and each cut at
// maxField characters (a 100 KB type must not make the page 30,000 px
// tall; the raw bytes and the download have every value whole).
type shownEnvelope struct {
	Type, Error, Origin, Correlation, Causation, Exchange, RoutingKey, ContentType, ReplyTo, MessageID, AMQPCorrelation template.HTML
}

// maxField bounds a value the message page shows in its envelope table.
const maxField = 2000

func showEnvelope(m *message) shownEnvelope {
	e := m.Envelope
	l := func(s string) template.HTML { return marked(s, maxField) }
	return shownEnvelope{Type: l(e.Type), Error: l(e.Error), Origin: l(e.Origin), Correlation: l(e.CorrelationID), Causation: l(e.CausationID),
		Exchange: l(m.Exchange), RoutingKey: l(m.RoutingKey), ContentType: l(m.ContentType), ReplyTo: l(m.ReplyTo),
		MessageID: l(m.MessageID), AMQPCorrelation: l(m.CorrelationID)}
}

// serveMessage shows one message in full; the read is audited.
func (c *Console) serveMessage(w http.ResponseWriter, r *http.Request) {
	queue, id := r.PathValue("queue"), r.PathValue("id")
	m, n, err := c.find(r.Context(), queue, id, readAnywayAsked(r))
	if c.refusedRead(w, r, queue, "view", err) {
		return
	}
	if err != nil {
		c.audit.add(r, auditEntry{Action: "view", Queue: queue, ID: id, Result: "failed: " + strings.TrimPrefix(err.Error(), "acemq: ")})
		c.brokerError(w, r, queue, err)
		return
	}
	if m == nil {
		c.audit.add(r, auditEntry{Action: "view", Queue: queue, ID: id, Result: "not found"})
		c.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("No message with id %s among the first %d messages of %s; it may have been replayed or purged.", quote(id), n, quote(queue)))
		return
	}
	c.audit.add(r, auditEntry{Action: "view", Queue: queue, ID: m.ID, Result: fmt.Sprintf("shown (%d bytes)", len(m.Body))})
	c.render(w, r, http.StatusOK, "message", "Message "+safetext.Line(m.ID), messagePage{
		Queue: queue, IsDLQ: strings.HasSuffix(queue, ".dlq"), Msg: m, Read: n, Fields: showEnvelope(m),
		History: history(m.Envelope, m.Headers, replay.SourceOf(queue)),
		Headers: headerLines(m.Headers, c.cfg.TraceURL), Body: decodeBody(m.ContentType, m.Body),
	})
}

// serveRaw sends a message's body as it is, as a download (never rendered
// by the browser); the read is audited.
func (c *Console) serveRaw(w http.ResponseWriter, r *http.Request) {
	queue, id := r.PathValue("queue"), r.PathValue("id")
	m, n, err := c.find(r.Context(), queue, id, readAnywayAsked(r))
	if c.refusedRead(w, r, queue, "raw", err) {
		return
	}
	if err != nil {
		c.audit.add(r, auditEntry{Action: "raw", Queue: queue, ID: id, Result: "failed: " + strings.TrimPrefix(err.Error(), "acemq: ")})
		c.brokerError(w, r, queue, err)
		return
	}
	if m == nil {
		c.audit.add(r, auditEntry{Action: "raw", Queue: queue, ID: id, Result: "not found"})
		c.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("No message with id %s among the first %d messages of %s.", quote(id), n, quote(queue)))
		return
	}
	c.audit.add(r, auditEntry{Action: "raw", Queue: queue, ID: m.ID, Result: fmt.Sprintf("downloaded %d bytes", len(m.Body))})
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", safeFileName(id)+".bin"))
	_, _ = w.Write(m.Body)
}

func safeFileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// brokerLabel is the broker and virtual host the overview names: the URL's
// scheme and host only, never its credentials.
func brokerLabel(raw string) string {
	if raw == "" {
		return ""
	}
	if queuelist.IsMemory(raw) {
		return safetext.Line(raw)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return safetext.Line(u.Scheme + "://" + u.Host + ", vhost " + queuelist.VhostOf(raw))
}
