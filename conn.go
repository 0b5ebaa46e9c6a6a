package acemq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq-go/acemq/transport"
	_ "github.com/acemq-go/acemq/transport/memory"   // registers memory://
	_ "github.com/acemq-go/acemq/transport/rabbitmq" // registers amqp:// and amqps://
)

// State is where a Conn is in its life.
type State int32

// Conn states.
const (
	// StateOpen: connected; publishing and consuming.
	StateOpen State = iota
	// StateLost: the connection was lost and waits for a recovery attempt.
	StateLost
	// StateReopening: a new connection is up and its channels, topology
	// and consumers are being restored.
	StateReopening
	// StateClosing: Close is draining consumers.
	StateClosing
	// StateClosed: closed, by Close or because recovery gave up.
	StateClosed
)

// String names the state.
func (s State) String() string {
	switch s {
	case StateOpen:
		return "open"
	case StateLost:
		return "lost"
	case StateReopening:
		return "reopening"
	case StateClosing:
		return "closing"
	case StateClosed:
		return "closed"
	}
	return fmt.Sprintf("state(%d)", int32(s))
}

type blockState struct {
	active bool
	reason string
}

type pubSet struct {
	gen     uint64
	confirm []transport.Publisher
	plain   transport.Publisher // non-confirming, only with confirms off
}

// Conn is a connection to a broker that keeps the AceMQ contract: it
// recovers from connection loss on its own, re-declaring what it declared
// and re-attaching its consumers, and refuses publishes it cannot make
// rather than losing them. A Conn holds two broker connections, one for
// publishing and one for consuming, so a broker that blocks publishers
// does not stall consumers' acks.
//
// A Conn is safe for concurrent use by any number of goroutines.
type Conn struct {
	cfg      config
	driver   transport.Driver
	tcfg     transport.Config
	redacted string
	origin   string
	logger   *slog.Logger
	permits  *permits
	pubs     atomic.Pointer[pubSet]
	// spareBatch is one finished SendAll batch kept for the next (see
	// batch): a Conn-owned slot, so a garbage collection does not empty it
	// as it would a sync.Pool.
	spareBatch atomic.Pointer[batch]
	state      atomic.Int32
	blocked    atomic.Pointer[blockState]
	blockTok   atomic.Pointer[byte] // identifies the publishing connection whose blocked notices count
	gaveUpErr  atomic.Pointer[error]
	stats      Stats
	tel        *telemetry

	repairMu sync.Mutex // serialises publishing-channel repairs

	mu        sync.Mutex
	gen       uint64
	pubConn   transport.Connection
	conConn   transport.Connection
	addrIndex int
	decls     []Declaration
	declKeys  map[string]bool
	consumers map[*consumerCore]struct{}
	stateCh   chan struct{}

	events    *eventQueue
	closing   context.Context // ends when Close starts
	beginStop context.CancelFunc
	closed    chan struct{}
	done      chan struct{} // see Done
	doneOnce  sync.Once
	superDone chan struct{}
	closeOnce sync.Once
	closeErr  error
	lostAt    atomic.Int64
}

// Connect dials the broker named by rawURL (memory://name, amqp://…,
// amqps://…) and returns an open Conn. Options are validated before any
// dial. With several addresses (WithAddresses) each is tried once, in
// order, within the connection timeout and ctx; the error lists every
// address's cause.
func Connect(ctx context.Context, rawURL string, opts ...Option) (*Conn, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password and all
		}
		return nil, configErr("url", "%q is not a URL: %v", redactURL(rawURL), err)
	}
	scheme := strings.ToLower(u.Scheme)
	driver, ok := transport.Lookup(scheme)
	if !ok {
		return nil, configErr("url", "no transport is registered for scheme %q; known schemes: %s (memory:// and amqp(s):// need no import)", u.Scheme, strings.Join(transport.Schemes(), ", "))
	}
	if uc, ok := driver.(transport.URLChecker); ok {
		set, err := uc.CheckURL(rawURL)
		if err != nil {
			return nil, configErr("url", "%s is not a URL the %s transport accepts: %v", redactURL(rawURL), driver.Name(), err)
		}
		if set.ConfirmsOff {
			cfg.confirms = false
		}
	}
	if cfg.tls != nil && scheme == "amqp" {
		cfg.problem("WithTLS", "TLS settings were given with an amqp:// URL, which is plaintext; use amqps://")
	}
	if cfg.insecureDev && scheme == "amqp" {
		cfg.problem("WithInsecureSkipVerifyForDevelopment", "it was given with an amqp:// URL, which is plaintext and has no certificate to verify; use amqps:// or drop the option")
	}
	if scheme == "amqps" {
		cfg.tls = checkTLS(&cfg)
	}
	checkSecurity(&cfg, scheme, redactURL(rawURL), u.User != nil)
	if cfg.credentials != nil && u.User != nil {
		cfg.problem("WithCredentials", "the URL carries user information and a credentials provider was given; use one source of credentials")
	}
	if len(cfg.problems) > 0 {
		return nil, errors.Join(cfg.problems...)
	}
	if cfg.codec == nil {
		cfg.codec = JSON()
	}
	logger := cfg.logger
	if logger == nil {
		logger = slog.Default()
	}
	origin := cfg.origin
	if origin == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "unknown-host"
		}
		origin = cfg.clientName + "@" + host
	}
	c := &Conn{
		cfg:       cfg,
		driver:    driver,
		redacted:  redactURL(rawURL),
		origin:    origin,
		logger:    logger.With("component", "acemq"),
		permits:   newPermits(cfg.maxOutstanding),
		declKeys:  map[string]bool{},
		consumers: map[*consumerCore]struct{}{},
		stateCh:   make(chan struct{}),
		closed:    make(chan struct{}),
		done:      make(chan struct{}),
		superDone: make(chan struct{}),
	}
	c.closing, c.beginStop = context.WithCancel(context.Background())
	c.tel = newTelemetry(&c.cfg, driver.Name())
	c.tcfg = transport.Config{
		URL:            rawURL,
		Addresses:      cfg.addresses,
		ConnectionName: cfg.clientName,
		Product:        "AceMQ for Go",
		Version:        libraryVersion(),
		Heartbeat:      cfg.heartbeat,
		ConnectTimeout: cfg.connectTimeout,
		TLS:            cfg.tls,
		Credentials:    cfg.credentials,
		Security:       &c.cfg.sec.settings,
	}
	if scheme == "amqps" && cfg.insecureDev {
		c.logger.Warn("acemq: amqps:// without verifying the broker's certificate (WithInsecureSkipVerifyForDevelopment); anyone on the network path can impersonate the broker, never use this in production", "url", c.redacted)
	}
	if scheme == "amqp" && u.Hostname() != "" && !isLoopback(u.Hostname()) {
		c.logger.Warn("acemq: plaintext amqp:// to a host that is not loopback; credentials and messages cross the network unencrypted, use amqps://", "url", c.redacted)
	}
	if cfg.onEvent != nil {
		c.events = newEventQueue()
		go c.dispatchEvents()
	}
	if err := c.dial(ctx, 0); err != nil {
		c.stopEvents()
		c.beginStop()
		return nil, err
	}
	c.state.Store(int32(StateOpen))
	go c.supervise()
	return c, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Mask whatever sits between "://" and the last "@".
		scheme, rest, ok := strings.Cut(raw, "://")
		if at := strings.LastIndex(rest, "@"); ok && at >= 0 {
			user, _, _ := strings.Cut(rest[:at], ":")
			return scheme + "://" + user + ":***@" + rest[at+1:]
		}
		return raw
	}
	if u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "***")
	}
	return strings.Replace(u.String(), "%2A%2A%2A", "***", 1)
}

func libraryVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path == "github.com/acemq-go/acemq" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/acemq-go/acemq" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// dial opens both connections and the publishing channels, starting at
// address index start. It does not touch consumers or declarations.
func (c *Conn) dial(ctx context.Context, start int) error {
	pcfg := c.tcfg
	pcfg.Start = start
	pcfg.ConnectionName = c.cfg.clientName + " (publishing)"
	// Only the current publishing connection may set the blocked state: a
	// notification still queued on a lost one must not leave a stale
	// "blocked" on its successor.
	tok := new(byte)
	c.blockTok.Store(tok)
	pcfg.OnBlocked = func(active bool, reason string) {
		if c.blockTok.Load() == tok {
			c.onBlocked(active, reason)
		}
	}
	pc, idx, err := c.driver.Dial(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("acemq: cannot connect to %s: %w", c.redacted, err)
	}
	ccfg := c.tcfg
	ccfg.Start = idx
	ccfg.ConnectionName = c.cfg.clientName + " (consuming)"
	cc, _, err := c.driver.Dial(ctx, ccfg)
	if err != nil {
		_ = pc.Close()
		return fmt.Errorf("acemq: cannot connect to %s: %w", c.redacted, err)
	}
	set, err := c.openPublishers(ctx, pc)
	if err != nil {
		_ = pc.Close()
		_ = cc.Close()
		return err
	}
	c.mu.Lock()
	c.gen++
	set.gen = c.gen
	c.pubConn, c.conConn, c.addrIndex = pc, cc, idx
	c.mu.Unlock()
	c.pubs.Store(set)
	return nil
}

func (c *Conn) openPublishers(ctx context.Context, pc transport.Connection) (*pubSet, error) {
	set := &pubSet{}
	for i := 0; i < c.cfg.publishChannels; i++ {
		p, err := pc.Publisher(ctx, true)
		if err != nil {
			return nil, fmt.Errorf("acemq: cannot open a publishing channel: %w", err)
		}
		set.confirm = append(set.confirm, p)
	}
	if !c.cfg.confirms {
		p, err := pc.Publisher(ctx, false)
		if err != nil {
			return nil, fmt.Errorf("acemq: cannot open a publishing channel: %w", err)
		}
		set.plain = p
	}
	return set, nil
}

// State returns the Conn's current state.
func (c *Conn) State() State { return State(c.state.Load()) }

// Done returns a channel that is closed when the Conn is closed for good:
// Close has drained its consumers, or recovery gave up. Nothing is
// delivered or confirmed after that, so work waiting on the Conn (a request
// waiting for its reply) can select on Done and stop at once instead of
// waiting out its own timeout. Before then the channel stays open,
// recoveries included.
func (c *Conn) Done() <-chan struct{} { return c.done }

func (c *Conn) markDone() { c.doneOnce.Do(func() { close(c.done) }) }

func (c *Conn) setState(s State) {
	c.mu.Lock()
	c.state.Store(int32(s))
	close(c.stateCh)
	c.stateCh = make(chan struct{})
	c.mu.Unlock()
}

// generation numbers the current pair of broker connections; each
// successful dial makes a new one.
func (c *Conn) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// stateChanged returns a channel closed at the next state or blocked change.
func (c *Conn) stateChanged() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stateCh
}

func (c *Conn) broadcast() {
	c.mu.Lock()
	close(c.stateCh)
	c.stateCh = make(chan struct{})
	c.mu.Unlock()
}

// Blocked reports, without a round trip, whether the broker has blocked
// the publishing connection (RabbitMQ's memory or disk alarm).
func (c *Conn) Blocked() bool {
	b := c.blocked.Load()
	return b != nil && b.active
}

// BlockedReason is the broker's reason for the current block ("low on
// memory"), or "" when not blocked.
func (c *Conn) BlockedReason() string {
	if b := c.blocked.Load(); b != nil && b.active {
		return b.reason
	}
	return ""
}

// Outstanding is how many confirmed publishes are waiting for the broker's
// answer now. Pinned at the ceiling means the broker stopped answering.
func (c *Conn) Outstanding() int { return c.permits.outstanding() }

// Origin is the origin stamped on envelopes this Conn publishes.
func (c *Conn) Origin() string { return c.origin }

// Transport names the broker kind: "rabbitmq" or "memory".
func (c *Conn) Transport() string { return c.driver.Name() }

// Capabilities lists what the broker supports, in the contract's spelling.
func (c *Conn) Capabilities() []string { return c.driver.Capabilities() }

// Codec is the Conn's default codec.
func (c *Conn) Codec() Codec { return c.cfg.codec }

// Logger is the Conn's logger.
func (c *Conn) Logger() *slog.Logger { return c.logger }

// ConfirmTimeout is the configured confirm timeout.
func (c *Conn) ConfirmTimeout() time.Duration { return c.cfg.confirmTimeout }

func (c *Conn) onBlocked(active bool, reason string) {
	if active {
		c.blocked.Store(&blockState{active: true, reason: reason})
		c.logger.Warn("acemq: the broker has blocked this connection; publishing is paused", "reason", reason)
		c.emit(Event{Kind: EventBlocked, Reason: reason})
	} else {
		c.blocked.Store(nil)
		c.logger.Info("acemq: the broker has unblocked this connection; publishing resumes")
		c.emit(Event{Kind: EventUnblocked})
	}
	c.broadcast()
}

// channel opens a throwaway channel on the consuming connection.
func (c *Conn) channel(ctx context.Context) (transport.Channel, error) {
	c.mu.Lock()
	cc := c.conConn
	c.mu.Unlock()
	if c.State() == StateClosed {
		return nil, ErrClosed
	}
	return cc.Channel(ctx)
}

// Channel opens a raw channel on the consuming connection, for operator
// tools that need basic.get, purge or queue inspection. The caller owns it
// and must Close it. It does not survive a recovery.
func (c *Conn) Channel(ctx context.Context) (transport.Channel, error) { return c.channel(ctx) }

// Apply validates t and declares it on the broker: exchanges, then queues,
// then bindings, each on a short-lived channel. It stops at the first
// refusal with an error naming the entity and the broker's text. What it
// declares is declared again after every recovery. Idempotent.
func (c *Conn) Apply(ctx context.Context, t *Topology) error {
	if err := t.Validate(); err != nil {
		return err
	}
	decls := t.Declarations()
	if err := applyDeclarations(ctx, c.channel, decls); err != nil {
		return err
	}
	c.record(decls)
	return nil
}

// Plan compares t with the broker without changing anything: each exchange
// and queue would be created, matches, or differs (with the broker's text).
func (c *Conn) Plan(ctx context.Context, t *Topology) (Plan, error) {
	if err := t.Validate(); err != nil {
		return Plan{}, err
	}
	return planDeclarations(ctx, c.channel, t.Declarations())
}

func declKey(d Declaration) string {
	switch d.Kind {
	case DeclExchange:
		return "e:" + d.Exchange.Name
	case DeclQueue:
		return "q:" + d.Queue.Name
	default:
		return "b:" + d.Binding.Queue + "\x00" + d.Binding.Exchange + "\x00" + d.Binding.RoutingKey
	}
}

// record remembers declarations for re-declaration after recovery, in
// original order, once each.
func (c *Conn) record(decls []Declaration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range decls {
		k := declKey(d)
		if c.declKeys[k] {
			continue
		}
		c.declKeys[k] = true
		c.decls = append(c.decls, d)
	}
}

// declaredWithDeadLettering reports whether q was declared through this
// Conn with broker dead-lettering.
func (c *Conn) declaredWithDeadLettering(q string) bool {
	_, ok := c.declaredQueueArg(q, "x-dead-letter-exchange")
	return ok
}

// declaredAsStream reports whether q was declared through this Conn as a
// stream queue.
func (c *Conn) declaredAsStream(q string) bool {
	typ, _ := c.declaredQueueArg(q, "x-queue-type")
	return typ == "stream"
}

// declaredQueueArg returns argument name of queue q as this Conn declared
// it, and whether q was declared with it.
func (c *Conn) declaredQueueArg(q, name string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.decls {
		if d.Kind == DeclQueue && d.Queue.Name == q {
			v, ok := d.Queue.Args[name]
			return v, ok
		}
	}
	return nil, false
}

// checkTLS applies the amqps:// rules (spec §1.1) to a copy of the WithTLS
// config and records a problem for a config that breaks them: TLS 1.2 or
// later (a lower MinVersion is raised; a MaxVersion below 1.2 is refused),
// and verification off only with WithInsecureSkipVerifyForDevelopment. It
// returns nil when the transport's default (the system store) applies.
func checkTLS(cfg *config) *tls.Config {
	if cfg.tls == nil && !cfg.insecureDev {
		return nil
	}
	t := &tls.Config{}
	if cfg.tls != nil {
		t = cfg.tls.Clone()
	}
	if t.MaxVersion != 0 && t.MaxVersion < tls.VersionTLS12 {
		cfg.problem("WithTLS", "the TLS config allows at most %s; amqps:// needs TLS 1.2 or later, so leave MaxVersion unset or set it to tls.VersionTLS12 or above", tls.VersionName(t.MaxVersion))
	}
	if t.MinVersion < tls.VersionTLS12 {
		t.MinVersion = tls.VersionTLS12
	}
	if t.InsecureSkipVerify && !cfg.insecureDev {
		cfg.problem("WithTLS", "the TLS config has InsecureSkipVerify set; amqps:// always verifies the broker, so give the broker's CA in RootCAs, or for development only add acemq.WithInsecureSkipVerifyForDevelopment()")
	}
	if cfg.insecureDev {
		t.InsecureSkipVerify = true
	}
	return t
}
