// Package actuator serves a Conn's metrics, health and build facts over
// HTTP (contract §6): /acemq-metrics (Prometheus text), /acemq-health
// (Spring Boot's JSON shape; 503 only when DOWN) and /acemq-info. It is
// unauthenticated by design and binds loopback by default.
//
// The manual's page on observability: https://github.com/acemq-go/acemq/blob/main/docs/observability.md
package actuator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
)

// DefaultAddr is where ListenAndServe binds when given "" (port 0 means
// an ephemeral port).
const DefaultAddr = "127.0.0.1:9464"

// Default paths.
const (
	DefaultMetricsPath = "/acemq-metrics"
	DefaultHealthPath  = "/acemq-health"
	DefaultInfoPath    = "/acemq-info"
)

// Library is the library's name on /acemq-info (acemq-{language}-amqp).
const Library = "acemq-go-amqp"

// Option configures a Handler.
type Option func(*config)

type config struct {
	metrics             *Metrics
	checks              []acemq.Check
	mPath, hPath, iPath string
	name, version       string
	timeout             time.Duration
}

// WithMetrics serves m on the metrics path. Without it the path answers
// 200 with an empty exposition.
func WithMetrics(m *Metrics) Option { return func(c *config) { c.metrics = m } }

// WithChecks adds application health checks; each becomes a component of
// /acemq-health under its name, and the worst status wins.
func WithChecks(checks ...acemq.Check) Option {
	return func(c *config) { c.checks = append(c.checks, checks...) }
}

// WithPaths replaces the three paths. Each must start with "/" and all
// must differ, or Handler returns an error.
func WithPaths(metrics, health, info string) Option {
	return func(c *config) { c.mPath, c.hPath, c.iPath = metrics, health, info }
}

// WithApplication names the application on /acemq-info (name and version
// are omitted when empty).
func WithApplication(name, version string) Option {
	return func(c *config) { c.name, c.version = name, version }
}

// WithHealthTimeout bounds the health aggregate (default
// 5s).
func WithHealthTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

type actuator struct {
	conn *acemq.Conn
	config
	notFound []byte
}

// Handler returns the actuator for conn (nil: health UNKNOWN, info without
// transport). It returns an error when the paths are not valid. The
// handler answers GET and HEAD only (405 otherwise), 404 with the paths
// for anything else, and 500 "The actuator failed to answer." when it
// cannot render. It is safe for concurrent use.
func Handler(conn *acemq.Conn, opts ...Option) (http.Handler, error) {
	a := &actuator{conn: conn, config: config{
		mPath: DefaultMetricsPath, hPath: DefaultHealthPath, iPath: DefaultInfoPath,
		timeout: 5 * time.Second,
	}}
	for _, o := range opts {
		o(&a.config)
	}
	for _, p := range []string{a.mPath, a.hPath, a.iPath} {
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("acemq: actuator path %q does not start with /; give paths such as /acemq-health", p)
		}
	}
	if a.mPath == a.hPath || a.mPath == a.iPath || a.hPath == a.iPath {
		return nil, fmt.Errorf("acemq: actuator paths %q, %q and %q are not all different; give each its own path", a.mPath, a.hPath, a.iPath)
	}
	if a.timeout <= 0 {
		return nil, fmt.Errorf("acemq: actuator health timeout %s is not positive", a.timeout)
	}
	a.notFound = []byte(fmt.Sprintf("Nothing here. Try %s, %s or %s.\n", a.mPath, a.hPath, a.iPath))
	return a, nil
}

func (a *actuator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			a.fail(w, r)
		}
	}()
	var serve func(http.ResponseWriter, *http.Request)
	switch r.URL.Path {
	case a.mPath:
		serve = a.serveMetrics
	case a.hPath:
		serve = a.serveHealth
	case a.iPath:
		serve = a.serveInfo
	default:
		write(w, r, http.StatusNotFound, ContentTypeText, a.notFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		write(w, r, http.StatusMethodNotAllowed, ContentTypeText, []byte("Only GET and HEAD.\n"))
		return
	}
	serve(w, r)
}

func (a *actuator) fail(w http.ResponseWriter, r *http.Request) {
	write(w, r, http.StatusInternalServerError, ContentTypeText, []byte("The actuator failed to answer.\n"))
}

// write sends status, type and length, and the body unless r is HEAD.
func write(w http.ResponseWriter, r *http.Request, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func (a *actuator) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		a.fail(w, r)
		return
	}
	write(w, r, status, ContentTypeJSON, append(body, '\n'))
}

// connDetails is the acemq component's details (contract §6).
type connDetails struct {
	Transport     string `json:"transport"`
	Open          bool   `json:"open"`
	Blocked       bool   `json:"blocked"`
	InFlight      int64  `json:"inFlight"`
	BlockedReason string `json:"blockedReason,omitempty"`
	Detail        string `json:"detail,omitempty"`
}

type checkDetails struct {
	Detail string `json:"detail,omitempty"`
}

type component struct {
	Status  acemq.HealthStatus `json:"status"`
	Details any                `json:"details"`
}

type healthBody struct {
	Status     acemq.HealthStatus   `json:"status"`
	Components map[string]component `json:"components,omitempty"`
}

func (a *actuator) serveHealth(w http.ResponseWriter, r *http.Request) {
	checks := a.checks
	var connName string
	if a.conn != nil {
		cc := acemq.CheckFunc("acemq", a.conn.Health)
		connName = cc.Name()
		checks = append([]acemq.Check{cc}, a.checks...)
	}
	if len(checks) == 0 {
		a.writeJSON(w, r, http.StatusOK, healthBody{Status: acemq.StatusUnknown})
		return
	}
	agg := acemq.CheckAll(r.Context(), a.timeout, checks...)
	body := healthBody{Status: agg.Status, Components: make(map[string]component, len(agg.Parts))}
	for name, p := range agg.Parts {
		if name == connName {
			body.Components[name] = component{Status: p.Status, Details: connDetails{
				Transport: p.Transport, Open: p.Open, Blocked: p.Blocked, InFlight: p.InFlight,
				BlockedReason: p.BlockedReason, Detail: p.Detail,
			}}
			continue
		}
		body.Components[name] = component{Status: p.Status, Details: checkDetails{Detail: p.Detail}}
	}
	status := http.StatusOK
	if agg.Status == acemq.StatusDown {
		status = http.StatusServiceUnavailable
	}
	a.writeJSON(w, r, status, body)
}

type infoBody struct {
	Library        string   `json:"library"`
	LibraryVersion string   `json:"libraryVersion"`
	Name           string   `json:"name,omitempty"`
	Version        string   `json:"version,omitempty"`
	Transport      string   `json:"transport,omitempty"`
	Capabilities   []string `json:"capabilities,omitempty"`
}

func (a *actuator) serveInfo(w http.ResponseWriter, r *http.Request) {
	b := infoBody{Library: Library, LibraryVersion: LibraryVersion(), Name: a.name, Version: a.version}
	if a.conn != nil {
		b.Transport = a.conn.Health(r.Context()).Transport
		b.Capabilities = capabilities(b.Transport)
		slices.Sort(b.Capabilities)
		if b.Capabilities == nil {
			b.Capabilities = []string{}
		}
	}
	a.writeJSON(w, r, http.StatusOK, b)
}

// LibraryVersion is the acemq module's version from the build info, or
// "unknown" (a development build, or no build info).
func LibraryVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	const path = "github.com/acemq-go/acemq"
	v := ""
	if bi.Main.Path == path {
		v = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			v = d.Version
			if d.Replace != nil {
				v = d.Replace.Version
			}
		}
	}
	if v == "" || v == "(devel)" {
		return "unknown"
	}
	return strings.TrimPrefix(v, "v")
}

// Serve serves h on ln until ctx ends, then shuts the server down (waiting
// up to 5s for requests in progress) and returns nil; it returns the
// server's error if serving fails first.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// ListenAndServe binds addr (DefaultAddr when "") and serves h until ctx
// ends (see Serve).
func ListenAndServe(ctx context.Context, addr string, h http.Handler) error {
	if addr == "" {
		addr = DefaultAddr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("acemq: the actuator cannot listen on %s: %w", addr, err)
	}
	return Serve(ctx, ln, h)
}

// capabilities lists what the transport driver named name supports (the
// drivers registered with package transport), or nil.
func capabilities(name string) []string {
	for _, scheme := range transport.Schemes() {
		if d, ok := transport.Lookup(scheme); ok && d.Name() == name {
			return append([]string(nil), d.Capabilities()...)
		}
	}
	return nil
}
