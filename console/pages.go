package console

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

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
	CSRF     string
	ReadOnly bool
	Data     any
}

func parsePages(cfg Config) (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"q":       func(name string) string { return url.PathEscape(name) },
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
	m.HandleFunc("GET /{$}", c.guard(c.serveOverview))
	m.HandleFunc("GET /api/overview", c.guard(c.serveOverviewJSON))
	m.HandleFunc("GET /audit", c.guard(c.serveAudit))
	m.HandleFunc("GET /q/{queue}", c.guard(c.serveQueue))
	m.HandleFunc("GET /q/{queue}/m/{id}", c.guard(c.serveMessage))
	m.HandleFunc("GET /q/{queue}/m/{id}/raw", c.guard(c.serveRaw))
	m.HandleFunc("/q/{queue}/replay", c.action("replay", c.replayAction))
	m.HandleFunc("/q/{queue}/park", c.action("park", c.parkAction))
	m.HandleFunc("/q/{queue}/purge", c.action("purge", c.purgeAction))
	m.HandleFunc("/q/{queue}/download", c.action("download", c.downloadAction))
	m.HandleFunc("/", c.guard(func(w http.ResponseWriter, r *http.Request) {
		c.errorPage(w, r, http.StatusNotFound, "There is no such page; start from the overview.")
	}))
	c.mux = m
}

func (c *Console) render(w http.ResponseWriter, status int, page, title string, data any) {
	t, ok := c.pages[page]
	if !ok {
		http.Error(w, "acemq: the console has no page "+page, http.StatusInternalServerError)
		return
	}
	var buf strings.Builder
	if err := t.Execute(&buf, view{Title: title, Base: c.cfg.BasePath, CSRF: c.csrf, ReadOnly: c.cfg.ReadOnly, Data: data}); err != nil {
		http.Error(w, "acemq: the console could not render "+page+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}

func (c *Console) errorPage(w http.ResponseWriter, _ *http.Request, status int, msg string) {
	c.render(w, status, "error", http.StatusText(status), struct {
		Status  int
		Message string
	}{status, msg})
}

func (c *Console) loginPage(w http.ResponseWriter, _ *http.Request, status int, msg string) {
	c.render(w, status, "login", "Sign in", msg)
}

// brokerError turns a failure to read a queue into a page.
func (c *Console) brokerError(w http.ResponseWriter, r *http.Request, queue string, err error) {
	if transport.Code(err) == transport.CodeNotFound {
		c.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("Queue %q does not exist on the broker; the overview lists the dead-letter queues.", queue))
		return
	}
	c.errorPage(w, r, http.StatusBadGateway, fmt.Sprintf("Cannot read %q from the broker (%s); check the broker and reload.", queue, strings.TrimPrefix(err.Error(), "acemq: ")))
}

func (c *Console) serveOverview(w http.ResponseWriter, r *http.Request) {
	rows, err := c.overview(r.Context())
	data := struct {
		Rows  []overviewRow
		Error string
	}{Rows: rows}
	if err != nil {
		data.Error = strings.TrimPrefix(err.Error(), "acemq: ")
	}
	c.render(w, http.StatusOK, "overview", "Dead letters", data)
}

func (c *Console) serveOverviewJSON(w http.ResponseWriter, r *http.Request) {
	rows, err := c.overview(r.Context())
	out := struct {
		Queues []overviewRow `json:"queues"`
		Error  string        `json:"error,omitempty"`
	}{Queues: rows}
	if out.Queues == nil {
		out.Queues = []overviewRow{}
	}
	if err != nil {
		out.Error = strings.TrimPrefix(err.Error(), "acemq: ")
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (c *Console) serveAudit(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "audit", "Audit log", c.audit.newestFirst())
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
}

func (c *Console) serveQueue(w http.ResponseWriter, r *http.Request) {
	queue := r.PathValue("queue")
	sel := selectionOf(r)
	p := queuePage{Queue: queue, Source: replay.SourceOf(queue), Sel: sel, Help: replay.FilterHelp,
		IsDLQ: strings.HasSuffix(queue, ".dlq"), Parked: replay.SourceOf(queue) + ".parked"}
	if !replay.IsSetAside(queue) {
		c.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("%q is not a dead-letter queue; the console shows QUEUE.dlq and QUEUE.parked queues.", queue))
		return
	}
	if _, err := replay.ParseFilter(sel.Filter); err != nil {
		p.FilterError = err.Error()
		sel.Filter = ""
	}
	sc, err := c.read(r.Context(), queue, sel)
	if err != nil {
		c.brokerError(w, r, queue, err)
		return
	}
	p.Scan = sc
	size := c.cfg.PageSize
	p.Pages = max(1, (len(sc.Matching)+size-1)/size)
	p.Page, _ = strconv.Atoi(r.Form.Get("page"))
	p.Page = min(max(p.Page, 1), p.Pages)
	lo := (p.Page - 1) * size
	p.Rows = sc.Matching[min(lo, len(sc.Matching)):min(lo+size, len(sc.Matching))]
	c.render(w, http.StatusOK, "queue", queue, p)
}

// messagePage is the message page's data.
type messagePage struct {
	Queue   string
	IsDLQ   bool
	Msg     *message
	Headers []headerLine
	Body    body
	Read    int
}

func (c *Console) serveMessage(w http.ResponseWriter, r *http.Request) {
	queue, id := r.PathValue("queue"), r.PathValue("id")
	m, n, err := c.find(r.Context(), queue, id)
	if err != nil {
		c.brokerError(w, r, queue, err)
		return
	}
	if m == nil {
		c.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("No message with id %q among the first %d messages of %s; it may have been replayed or purged.", id, n, queue))
		return
	}
	c.render(w, http.StatusOK, "message", "Message "+id, messagePage{
		Queue: queue, IsDLQ: strings.HasSuffix(queue, ".dlq"), Msg: m, Read: n,
		Headers: headerLines(m.Headers, c.cfg.TraceURL), Body: decodeBody(m.ContentType, m.Body),
	})
}

// serveRaw sends a message's body as it is, as a download (never rendered
// by the browser).
func (c *Console) serveRaw(w http.ResponseWriter, r *http.Request) {
	queue, id := r.PathValue("queue"), r.PathValue("id")
	m, n, err := c.find(r.Context(), queue, id)
	if err != nil {
		c.brokerError(w, r, queue, err)
		return
	}
	if m == nil {
		c.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("No message with id %q among the first %d messages of %s.", id, n, queue))
		return
	}
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
