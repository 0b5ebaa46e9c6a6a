package acemq

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/acemq-go/acemq/internal/redact"
	"github.com/acemq-go/acemq/transport"
	_ "github.com/acemq-go/acemq/transport/memory"   // registers memory://
	_ "github.com/acemq-go/acemq/transport/rabbitmq" // registers amqp:// and amqps://
)

// Conn is a connection to a broker that keeps the AceMQ contract: it
// recovers from connection loss on its own, re-declaring what it declared
// and re-attaching its consumers, and refuses publishes it cannot make
// rather than losing them. A Conn holds two broker connections, one for
// publishing and one for consuming, so a broker that blocks publishers
// does not stall consumers' acks.
//
// A Conn is safe for concurrent use by any number of goroutines.
type Conn struct {
	cfg    config // read only once Connect returns
	origin string
	logger *slog.Logger
	tel    *telemetry
	stats  counters

	// The parts, one file each, named after the type. Each owns its own
	// state; they reach each other only through methods.
	events    *events      // the event handler's queue and goroutine
	links     *links       // the two broker connections and their generation
	life      *lifecycle   // state, supervisor, recovery, Close
	pub       *publishing  // channels, permits, admission, write, confirm
	decls     *declared    // what to declare again after a recovery
	consumers *consumerSet // the running consumers (consumer_host.go: what they may reach)
}

// Connect dials the broker named by rawURL (memory://name, amqp://…,
// amqps://…) and returns an open Conn. The zero Config works; the Config
// is validated before any dial. With several addresses (Config.Addresses)
// each is tried once, in order, within the connection timeout and ctx; the
// error lists every address's cause.
func Connect(ctx context.Context, rawURL string, config Config) (*Conn, error) {
	cfg := config.internal()
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password and all
		}
		return nil, configErr("url", "%q is not a URL: %v", redact.URL(rawURL), err)
	}
	scheme := strings.ToLower(u.Scheme)
	driver, ok := transport.Lookup(scheme)
	if !ok {
		return nil, configErr("url", "no transport is registered for scheme %q; known schemes: %s (memory:// and amqp(s):// need no import)", u.Scheme, strings.Join(transport.Schemes(), ", "))
	}
	if uc, ok := driver.(transport.URLChecker); ok {
		set, err := uc.CheckURL(rawURL)
		if err != nil {
			return nil, configErr("url", "%s is not a URL the %s transport accepts: %v", redact.URL(rawURL), driver.Name(), err)
		}
		if set.ConfirmsOff {
			cfg.confirms = false
		}
	}
	if cfg.tls != nil && scheme == "amqp" {
		cfg.problem("Config.TLS", "TLS settings were given with an amqp:// URL, which is plaintext; use amqps://")
	}
	if cfg.insecureDev && scheme == "amqp" {
		cfg.problem("Config.InsecureSkipVerifyForDevelopment", "it was given with an amqp:// URL, which is plaintext and has no certificate to verify; use amqps:// or drop the field")
	}
	if scheme == "amqps" {
		cfg.tls = checkTLS(&cfg)
	}
	checkSecurity(&cfg, scheme, redact.URL(rawURL), u.User != nil)
	if cfg.credentials != nil && u.User != nil {
		cfg.problem("Config.Credentials", "the URL carries user information and a credentials provider was given; use one source of credentials")
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
		origin:    origin,
		logger:    logger.With("component", "acemq"),
		decls:     &declared{},
		consumers: &consumerSet{},
	}
	c.tel = newTelemetry(&c.cfg, driver.Name())
	c.links = &links{
		driver:     driver,
		clientName: cfg.clientName,
		redacted:   redact.URL(rawURL),
		tcfg: transport.Config{
			URL:            rawURL,
			Addresses:      cfg.addresses,
			ConnectionName: cfg.clientName,
			Product:        "AceMQ for Go",
			Version:        libraryVersion(),
			Heartbeat:      transportHeartbeat(cfg.heartbeat),
			ConnectTimeout: cfg.connectTimeout,
			TLS:            cfg.tls,
			Credentials:    cfg.credentials,
			Security:       &c.cfg.sec.settings,
		},
	}
	if scheme == "amqps" && cfg.insecureDev {
		c.logger.Warn("acemq: amqps:// without verifying the broker's certificate (Config.InsecureSkipVerifyForDevelopment); anyone on the network path can impersonate the broker, never use this in production", "url", c.links.redacted)
	}
	if scheme == "amqp" && u.Hostname() != "" && !isLoopback(u.Hostname()) {
		c.logger.Warn("acemq: plaintext amqp:// to a host that is not loopback; credentials and messages cross the network unencrypted, use amqps://", "url", c.links.redacted)
	}
	c.events = newEvents(cfg.onEvent)
	c.pub = &publishing{
		cfg: &c.cfg, origin: origin, logger: c.logger, tel: c.tel, stats: &c.stats, events: c.events,
		permits: newPermits(cfg.maxOutstanding),
	}
	c.life = newLifecycle(&c.cfg, c.logger, c.links, c.pub, c.decls, c.consumers, c.events)
	c.pub.life = c.life
	if err := c.life.connect(ctx, 0); err != nil {
		c.life.abort()
		return nil, err
	}
	c.life.start()
	return c, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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

// State returns the Conn's current state.
func (c *Conn) State() State { return c.life.current() }

// Done returns a channel that is closed when the Conn is closed for good:
// Close has drained its consumers, or recovery gave up. Nothing is
// delivered or confirmed after that, so work waiting on the Conn (a request
// waiting for its reply) can select on Done and stop at once instead of
// waiting out its own timeout. Before then the channel stays open,
// recoveries included.
func (c *Conn) Done() <-chan struct{} { return c.life.done }

// Blocked reports, without a round trip, whether the broker has blocked
// the publishing connection (RabbitMQ's memory or disk alarm). The
// broker's reason ("low on memory") is in Health's BlockedReason and on
// the EventBlocked event.
func (c *Conn) Blocked() bool {
	b, _ := c.pub.isBlocked()
	return b
}

// channel opens a throwaway channel on the consuming connection.
func (c *Conn) channel(ctx context.Context) (transport.Channel, error) { return c.life.channel(ctx) }

// Channel opens a raw channel on the consuming connection, for operator
// tools that need basic.get, purge or queue inspection. The caller owns it
// and must Close it. It does not survive a recovery.
func (c *Conn) Channel(ctx context.Context) (transport.Channel, error) { return c.channel(ctx) }

// Apply validates t and declares it on the broker: exchanges, then queues,
// then bindings, each on a short-lived channel. It stops at the first
// refusal with an error naming the entity and the broker's text. What it
// declares is declared again after every recovery. Idempotent. A Retries
// policy that holds its waits in the queue is resolved against this broker
// first (Plan.Retries shows the outcome): WaitsInQueue fails on a broker
// without delayed retry; WaitsInQueueWhereSupported declares the ladder
// there instead.
func (c *Conn) Apply(ctx context.Context, t *Topology) error {
	if err := t.Validate(); err != nil {
		return err
	}
	resolved, _, err := c.resolveRetryWaits(ctx, t)
	if err != nil {
		return err
	}
	decls := t.declarationsFor(resolved)
	if err := applyDeclarations(ctx, c.channel, decls); err != nil {
		return err
	}
	c.decls.record(decls)
	return nil
}

// Plan compares t with the broker without changing anything: each exchange
// and queue would be created, matches, or differs (with the broker's text).
func (c *Conn) Plan(ctx context.Context, t *Topology) (Plan, error) {
	if err := t.Validate(); err != nil {
		return Plan{}, err
	}
	resolved, retries, err := c.resolveRetryWaits(ctx, t)
	if err != nil {
		return Plan{}, err
	}
	plan, err := planDeclarations(ctx, c.channel, t.declarationsFor(resolved))
	plan.Retries = retries
	return plan, err
}

// checkTLS applies the amqps:// rules (spec §1.1) to a copy of the Config.TLS
// config and records a problem for a config that breaks them: TLS 1.2 or
// later (a lower MinVersion is raised; a MaxVersion below 1.2 is refused),
// and verification off only with Config.InsecureSkipVerifyForDevelopment. It
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
		cfg.problem("Config.TLS", "the TLS config allows at most %s; amqps:// needs TLS 1.2 or later, so leave MaxVersion unset or set it to tls.VersionTLS12 or above", tls.VersionName(t.MaxVersion))
	}
	if t.MinVersion < tls.VersionTLS12 {
		t.MinVersion = tls.VersionTLS12
	}
	if t.InsecureSkipVerify && !cfg.insecureDev {
		cfg.problem("Config.TLS", "the TLS config has InsecureSkipVerify set; amqps:// always verifies the broker, so give the broker's CA in RootCAs, or for development only set Config.InsecureSkipVerifyForDevelopment")
	}
	if cfg.insecureDev {
		t.InsecureSkipVerify = true
	}
	return t
}

// Close drains every consumer concurrently under one deadline (the drain
// timeout, or ctx's earlier deadline), waits within the same deadline for
// outstanding confirms, then closes both connections. Deliveries prefetched
// but not started go back to the broker unrun. It returns nil or a
// *DrainTimeoutError naming what was left unsettled (it will be
// redelivered), joined with ctx's error if ctx ended first. Close is
// idempotent: later calls return the first call's result.
func (c *Conn) Close(ctx context.Context) error { return c.life.close(ctx) }

// transportHeartbeat is the heartbeat as transport.Config takes it: the
// Conn's 0 ("none", from a negative Config.Heartbeat) is negative there,
// where 0 means the driver's default.
func transportHeartbeat(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
