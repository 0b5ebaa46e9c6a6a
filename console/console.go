// Package console serves the dead-letter console: an http.Handler that
// shows every {q}.dlq and {q}.parked queue, the messages in one with
// their reasons, one message in full, and replays, parks, purges and
// downloads them with the replay package's at-least-once rules.
//
// Pages are rendered on the server with html/template (every value
// escaped); the little JavaScript they use is one embedded file, so the
// console needs no build step and no network. Every page and action needs
// the console's token; state-changing actions are POST with a CSRF token;
// a read-only console hides and refuses every action; every action is
// written to an audit log that the console shows.
//
// Browsing a queue takes its messages (replay.Browse: one subscription
// with a prefetch of the messages read) and returns them all at once: they
// come back with the redelivered flag set, in their order. The console
// reads only where that moves no message toward a delivery limit
// (replay.Inspect); elsewhere a page says why and reads only when the
// operator confirms (Read anyway: POST, CSRF, audited, never on a
// read-only console), and the overview never reads it. The console
// serialises its own browsing and actions per queue, so a replay never
// runs while a page holds some of the queue's messages.
//
// The manual's page on the acemq command and the console: https://github.com/acemq-go/acemq/blob/main/docs/command.md
package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console/internal/queuelist"
	"github.com/acemq-go/acemq/replay"
)

// Config configures a Console. Token is required; the zero value of every
// other field works.
type Config struct {
	// URL is the broker URL the Conn was opened with. The console uses it
	// to list queues (RabbitMQ's management API, or the memory:// broker in
	// process) and names its scheme, host and vhost on the overview; its
	// credentials never reach a page.
	URL string
	// ManagementURL is RabbitMQ's management API (default: URL's host and
	// credentials on port 15672). It lists the queues and says, before any
	// read, a queue's type, arguments and policies (replay.ManagementAPI):
	// without it the console reads no RabbitMQ queue unless told to.
	ManagementURL string
	// ListQueues, when set, lists the broker's queues instead of URL and
	// ManagementURL (a service that knows its queues can name them).
	ListQueues func(ctx context.Context) ([]string, error)
	// Token is the secret that signs a browser in (the sign-in form; the
	// browser then holds a session cookie, never the token) or that a
	// script sends as Authorization: Bearer. It never goes in a URL: a
	// request carrying ?token= is refused, since a browser keeps URLs in
	// its history. At least 16 characters and about 64 bits of estimated
	// randomness ("passwordpassword" is refused); GenerateToken makes one.
	// SignInLink makes one-time links that sign a browser in without it.
	Token string
	// SignInCodeTTL is how long a SignInLink's one-time code may wait to
	// be used (default 1 hour).
	SignInCodeTTL time.Duration
	// SessionTTL is how long a browser stays signed in (default 12 hours).
	// A session also ends on sign-out, and every session ends when the
	// process stops.
	SessionTTL time.Duration
	// IdentityHeader names a request header that an authenticating reverse
	// proxy sets to the person it signed in (e.g. X-Forwarded-User); the
	// audit log records it as the user. It is believed only on requests
	// from TrustedProxies. Empty (the default) reads no header.
	IdentityHeader string
	// TrustedProxies are the addresses ("127.0.0.1", "::1", "10.0.0.0/8")
	// of the proxies whose IdentityHeader, and X-Forwarded-For, are
	// believed. Required with IdentityHeader.
	TrustedProxies []string
	// ReadOnly hides every action and refuses it with 403.
	ReadOnly bool
	// TraceURL links a message's trace id to a tracing UI; "{traceId}" in
	// it is replaced (e.g. http://localhost:16686/trace/{traceId}).
	TraceURL string
	// BasePath is the path the console is mounted under (e.g. "/console"
	// behind http.StripPrefix); links are built with it. Default "".
	BasePath string
	// ScanLimit bounds how many messages a queue page, a preview or a
	// message look-up reads (default 1,000). A page says when a queue
	// holds more than it read. Every page reads (and gives back) that
	// many, so its cost grows with the limit: about a second per 1,000
	// messages on a loaded 2-core machine (see docs/command.md).
	ScanLimit int
	// PageSize is how many messages a queue page lists (default 50).
	PageSize int
	// Audit, when set, receives each audit entry as a JSON line as well.
	Audit io.Writer
	// Logger reports failures to write the audit log (default: discard).
	Logger *slog.Logger
	// ActionTimeout bounds one replay, park, purge or download (default
	// 10 minutes). An action outlives the request that started it, so a
	// closed browser tab does not stop a replay half way.
	ActionTimeout time.Duration
}

// Console is the dead-letter console's http.Handler. It starts no
// goroutines. Safe for concurrent use.
type Console struct {
	conn  *acemq.Conn
	cfg   Config
	mux   *http.ServeMux
	pages map[string]*template.Template

	sessions   *sessions
	cookieName string // unique per console, so consoles on one host do not collide
	trusted    []netip.Prefix
	broker     string // the broker and vhost, for the overview

	locksMu sync.Mutex
	locks   map[string]*sync.Mutex

	statsMu sync.Mutex
	stats   map[string]*queueStats

	audit auditLog

	signIns *throttle // failed sign-ins

	// manage names the management API for reads (replay.ManagementAPI);
	// nil when the console has no broker URL to derive it from.
	manage replay.Option

	// browseHook, when set (tests), runs after each message a browse
	// reads, while the console holds the queue; holdHook runs just before
	// the console waits for a queue.
	browseHook func(queue string, read int)
	holdHook   func(queue string)
}

// GenerateToken returns a fresh random token (32 hex digits) for
// Config.Token. It fails only if the system's random source does.
func GenerateToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", errors.New("acemq: cannot generate a console token: the system's random source failed; pass a token instead")
	}
	return hex.EncodeToString(b), nil
}

// minTokenBits is the least estimated randomness a token may have.
const minTokenBits = 64

// tokenBits estimates a token's randomness from its spread of characters
// (its length times the Shannon entropy of its characters' frequencies):
// 32 random hex digits give about 125, "passwordpassword" about 44.
func tokenBits(t string) float64 {
	counts := map[rune]float64{}
	n := 0.0
	for _, r := range t {
		counts[r]++
		n++
	}
	h := 0.0
	for _, c := range counts {
		p := c / n
		h -= p * math.Log2(p)
	}
	return h * n
}

// SignInLink returns the path, under BasePath, of a one-time sign-in link
// ("/sign-in#code=…"), for the operator to open: the code sits in the
// fragment, which a browser never sends, and the page posts it once to
// start a session, so neither the token nor a live code is left in the
// browser's history. A code works once, within SignInCodeTTL. It fails
// only if the system's random source does.
func (c *Console) SignInLink() (string, error) {
	code, err := c.sessions.mint()
	if err != nil {
		return "", errors.New("acemq: cannot make a sign-in link: the system's random source failed; sign in with the token")
	}
	return c.cfg.BasePath + "/sign-in#code=" + code, nil
}

// New returns the console for conn. It fails with a ConfigurationError
// when conn is nil or the token is empty, shorter than 16 characters or
// guessable (minTokenBits).
func New(conn *acemq.Conn, cfg Config) (*Console, error) {
	if conn == nil {
		return nil, &acemq.ConfigurationError{Option: "conn", Reason: "the console needs an open Conn; pass the one acemq.Connect returned"}
	}
	if len(cfg.Token) < 16 {
		return nil, &acemq.ConfigurationError{Option: "console.Config.Token", Reason: "the token is empty or shorter than 16 characters; give at least 16 random characters (openssl rand -hex 16), or leave the acemq console's --token unset to have one generated (console.GenerateToken in Go)"}
	}
	if bits := tokenBits(cfg.Token); bits < minTokenBits {
		return nil, &acemq.ConfigurationError{Option: "console.Config.Token", Reason: fmt.Sprintf("the token looks guessable (about %.0f bits of randomness by its spread of characters, want %d): repeated or few distinct characters; give 32 random hex digits (openssl rand -hex 16), or leave the acemq console's --token unset to have one generated (console.GenerateToken in Go)", bits, minTokenBits)}
	}
	trusted, err := parseTrusted(cfg.IdentityHeader, cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	if cfg.ListQueues == nil && cfg.URL == "" {
		return nil, &acemq.ConfigurationError{Option: "console.Config.URL", Reason: "the console lists queues through the broker URL; set URL (or ListQueues)"}
	}
	if cfg.ScanLimit <= 0 {
		cfg.ScanLimit = 1000
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 50
	}
	if cfg.ActionTimeout <= 0 {
		cfg.ActionTimeout = 10 * time.Minute
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.SignInCodeTTL <= 0 {
		cfg.SignInCodeTTL = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.BasePath = strings.TrimSuffix(cfg.BasePath, "/")
	pages, err := parsePages(cfg)
	if err != nil {
		return nil, err
	}
	sess, err := newSessions(cfg.SessionTTL, cfg.SignInCodeTTL)
	if err != nil {
		return nil, errors.New("acemq: cannot start the console: the system's random source failed")
	}
	id, err := randomHex(4)
	if err != nil {
		return nil, errors.New("acemq: cannot start the console: the system's random source failed")
	}
	c := &Console{
		conn: conn, cfg: cfg, pages: pages,
		sessions: sess, cookieName: "acemq_console_" + id, trusted: trusted, broker: brokerLabel(cfg.URL),
		locks: map[string]*sync.Mutex{},
		stats: map[string]*queueStats{},
		// Ten wrong tries at once from one address, then one every 6 s;
		// a hundred from all addresses, then ten a second.
		signIns: newThrottle(10, 6*time.Second),
	}
	c.audit = auditLog{w: cfg.Audit, log: cfg.Logger, who: c.who}
	if cfg.URL != "" && !queuelist.IsMemory(cfg.URL) {
		mgmt := cfg.ManagementURL
		if mgmt == "" {
			mgmt, _ = queuelist.ManagementURL(cfg.URL)
		}
		c.manage = replay.ManagementAPI(mgmt, queuelist.VhostOf(cfg.URL))
	}
	c.routes()
	return c, nil
}

// ServeHTTP serves the console. Every response carries a strict
// Content-Security-Policy (no inline script or style, nothing from
// another origin) and same-origin referrer, nosniff and frame-deny headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: with no-referrer a browser sends
	// "Origin: null" on the console's own forms.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

// lock returns the mutex that serialises the console's browsing and
// actions on queue.
func (c *Console) lock(queue string) *sync.Mutex {
	c.locksMu.Lock()
	defer c.locksMu.Unlock()
	m, ok := c.locks[queue]
	if !ok {
		m = &sync.Mutex{}
		c.locks[queue] = m
	}
	return m
}

// hold waits until the console has queue to itself and returns the
// release.
func (c *Console) hold(queue string) (release func()) {
	mu := c.lock(queue)
	if c.holdHook != nil {
		c.holdHook(queue)
	}
	mu.Lock()
	return mu.Unlock
}

// readOptions are the options of a read of a queue: the management API,
// and AllowUnsafeRead when the operator asked for it (readAnyway).
func (c *Console) readOptions(unsafe bool) []replay.Option {
	var opts []replay.Option
	if c.manage != nil {
		opts = append(opts, c.manage)
	}
	if unsafe {
		opts = append(opts, replay.AllowUnsafeRead())
	}
	return opts
}

// listQueues lists every queue's name.
func (c *Console) listQueues(ctx context.Context) ([]string, error) {
	if c.cfg.ListQueues != nil {
		return c.cfg.ListQueues(ctx)
	}
	ds, err := queuelist.List(ctx, c.cfg.URL, c.cfg.ManagementURL)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.Name
	}
	return names, nil
}
