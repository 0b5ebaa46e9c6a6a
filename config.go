package acemq

import (
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/acemq-go/acemq/security"
	"github.com/acemq-go/acemq/transport"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Defaults (behaviour §1.2, contract §3.12); each is documented on the
// Config field it fills.
const (
	defaultPrefetch                = 20
	defaultMaxOutstandingPublishes = 1000
	defaultConfirmTimeout          = 10 * time.Second
	defaultDrainTimeout            = 20 * time.Second
	defaultRecoveryInterval        = time.Second
	defaultRecoveryIntervalMax     = 30 * time.Second
	defaultConnectionTimeout       = 10 * time.Second
	defaultHeartbeat               = 10 * time.Second
	maxHeartbeat                   = 65535 * time.Second
	defaultPublishChannels         = 4
	defaultClientName              = "acemq"
	// setAsideBound bounds a set-aside or other consumer hop, detached from
	// the caller's cancellation.
	setAsideBound = 30 * time.Second
	// inProgressDelay is the default hold of an InProgress decision and of
	// the last-resort requeue.
	inProgressDelay = 5 * time.Second
	drainGrace      = 500 * time.Millisecond
)

// Config configures a Conn. The zero Config works: every zero field means
// the default its comment gives. A field that also appears on
// ConsumerConfig, PublisherConfig or SendOptions has the same name and type
// there, and the narrower setting wins (Send over Publisher over Conn,
// Consumer over Conn). Connect validates the whole Config before anything
// dials; a value that can never work makes it return a *ConfigurationError
// naming the field.
type Config struct {
	// ClientName is the AMQP connection name operators see and the first
	// half of the default origin ({ClientName}@{hostname}). Default "acemq".
	ClientName string
	// Origin is the whole origin string stamped on envelopes that carry
	// none (default {ClientName}@{hostname}).
	Origin string
	// Codec is the Conn's default codec (JSON when nil). Publishers,
	// consumers and single sends may override it.
	Codec Codec
	// Prefetch is the default consumer prefetch (0 means 20). Unlimited
	// prefetch is refused: a negative value is a ConfigurationError.
	Prefetch int
	// MaxOutstandingPublishes is the connection-wide ceiling on publishes
	// waiting for a confirm (0 means 1000).
	MaxOutstandingPublishes int
	// ConfirmTimeout bounds both the wait for an outstanding-publish
	// permit and the wait for a written message's confirm (0 means 10s).
	ConfirmTimeout time.Duration
	// DrainTimeout is the one deadline Close spends draining every
	// consumer (0 means 20s; a negative value means do not wait at all).
	DrainTimeout time.Duration
	// RecoveryInterval is the delay before the first recovery attempt
	// (0 means 1s); it doubles up to RecoveryIntervalMax (0 means 30s,
	// or RecoveryInterval when that is larger). Each wait is jittered: a
	// random time between half the step and the step, so a fleet of
	// clients does not reconnect in the same instant. A consumer's
	// re-subscription after a stall backs off the same way.
	RecoveryInterval    time.Duration
	RecoveryIntervalMax time.Duration
	// RecoveryAttempts caps recovery attempts; after the last one fails
	// the Conn gives up and closes. 0 means unlimited.
	RecoveryAttempts int
	// ConnectionTimeout bounds each address's dial (TCP, TLS and AMQP
	// handshake). 0 means 10s.
	ConnectionTimeout time.Duration
	// Heartbeat is the AMQP heartbeat (0 means 10s; a negative value
	// turns heartbeats off on both connections). AMQP carries it in whole
	// seconds: a positive value is rounded up (500ms asks for 1s, 1.5s
	// for 2s), and Config() reports what was asked for; more than 65535s
	// is refused. The broker's own setting may lower it.
	Heartbeat time.Duration
	// NoPublisherConfirms turns publisher confirms off for application
	// publishes: Send then returns once written (outcome "published") and
	// takes no permit. Library hops and mandatory publishes stay
	// confirmed.
	NoPublisherConfirms bool
	// WaitForRecovery makes publishes during a recovery wait for it,
	// bounded by their context (or the confirm timeout when the context
	// has no deadline), instead of being refused at once. A Send, or a
	// SendAll member, whose write meets the loss before the Conn has
	// noticed it (nothing written) waits too.
	WaitForRecovery bool
	// Retry is the default retry policy consumers inherit (the zero
	// policy is NoRetry). An invalid policy is a ConfigurationError.
	Retry RetryPolicy
	// Logger is the structured logger. nil means slog.Default(), so
	// set-aside failures, recoveries and blocks reach the operator without
	// wiring; use slog.New(slog.DiscardHandler) to silence the library.
	Logger *slog.Logger
	// PublishInterceptors run in order before encoding on every
	// application publish.
	PublishInterceptors []PublishInterceptor
	// ConsumeInterceptors run in order before decoding on every delivery,
	// before a consumer's own.
	ConsumeInterceptors []ConsumeInterceptor
	// TLS is the TLS configuration for amqps:// (it must not be given with
	// amqp://). Without it amqps:// verifies the broker's chain and host
	// name against the system store; a RootCAs pool given here replaces
	// that store. Connect works on a copy and enforces two rules on it:
	//
	//   - TLS 1.2 or later: a MinVersion below 1.2 is raised to 1.2, and a
	//     MaxVersion below 1.2 (a config that could only speak older TLS)
	//     is refused with a ConfigurationError.
	//   - The broker is always verified: InsecureSkipVerify is refused with
	//     a ConfigurationError unless InsecureSkipVerifyForDevelopment is
	//     also set, so a verify-off tls.Config shared with other clients is
	//     never inherited by accident.
	TLS *tls.Config
	// InsecureSkipVerifyForDevelopment turns off verification of the
	// broker's certificate chain and host name for amqps://, for
	// development against a broker with a self-signed certificate only.
	// Anyone on the network path can then impersonate the broker and read
	// credentials and messages. Connect logs a warning when it is set;
	// with amqp:// it is a ConfigurationError.
	InsecureSkipVerifyForDevelopment bool
	// Credentials is a credentials function asked on every dial, so
	// rotated passwords need no restart. It cannot be combined with user
	// information in the URL or with CredentialsProvider.
	Credentials func(ctx context.Context) (user, password string, err error)
	// TLSMode states the TLS mode instead of leaving it to the URL:
	// security.ModeRequired (TLS, the broker verified) or
	// security.ModeDisabled (plaintext amqp://). A mode that does not
	// match the URL's scheme is a ConfigurationError before any dial. The
	// insecure mode is set only by InsecureSkipVerifyForDevelopment.
	TLSMode security.Mode
	// DevelopmentCertificates allows development certificates (those whose
	// organisation says security.DevelopmentMarker, made by `acemq
	// certs`) as the broker's certificate, in its chain, as the trusted CA
	// and as the client certificate. Without it every one of them is
	// refused. For development and tests only.
	DevelopmentCertificates bool
	// ClientCertificate is presented for mutual TLS (amqps:// only):
	// security.CertificateFiles(cert, key) or security.CertificatePEM(cert,
	// key). Connect loads it before dialing; an unreadable or mismatched
	// pair is a ConfigurationError naming the files (never the key).
	ClientCertificate security.Certificate
	// ExternalAuth logs in with the SASL EXTERNAL mechanism: the broker
	// takes the user from the client certificate and no password is sent.
	// It needs amqps:// and ClientCertificate, and refuses user
	// information in the URL and a credentials provider.
	ExternalAuth bool
	// CredentialsProvider is where credentials come from, asked on every
	// dial (each address, each recovery attempt): security.Static,
	// security.Env, security.File or a security.ProviderFunc. A provider
	// whose answer carries an expiry has its secret refreshed on the open
	// connection before then (AMQP update-secret).
	CredentialsProvider security.Provider
	// Addresses lists cluster node addresses (host:port) tried in order;
	// the URL supplies scheme, vhost and credentials.
	Addresses []string
	// PublishChannels is how many confirm-mode channels publishing
	// pipelines across (0 means 4).
	PublishChannels int
	// OnEvent receives connection events (lost, retrying, recovered,
	// gave-up, blocked, unblocked) on a goroutine of its own, in order.
	OnEvent func(Event)
	// OnSettlement is called once per settled delivery, after the engine
	// decided the outcome and before it is carried out, on the consumer's
	// goroutine: it must be fast and goroutine-safe.
	OnSettlement func(Settlement)
	// OnPublish is called once per application publish with its outcome,
	// before Send returns. It must be fast and goroutine-safe.
	OnPublish func(PublishReport)
	// OnFallback is told about every hop that could not be made: a
	// set-aside that failed or a missing retry rung (alert on both).
	OnFallback func(Fallback)
	// MeterProvider is where the Conn's metrics (contract §5.1) go. nil
	// means otel.GetMeterProvider() at Connect, a no-op until the
	// application installs an SDK.
	MeterProvider metric.MeterProvider
	// TracerProvider is where the Conn's spans go. nil means
	// otel.GetTracerProvider() at Connect.
	TracerProvider trace.TracerProvider
	// Propagator carries trace context in message headers. nil means W3C
	// Trace Context.
	Propagator propagation.TextMapPropagator
	// MaxMessageSize is the largest body an application publish (Send,
	// SendAll, PublishRaw, and so the outbox relay, replay and replies)
	// writes; a larger one is refused before anything is written, matching
	// ErrMessageTooLarge, with a reason that points at the claim check
	// (package claimcheck). 0 means 16 MiB, RabbitMQ 4's default
	// max_message_size; set it to the broker's max_message_size when that
	// differs (RabbitMQ 3.x accepted 128 MiB). A negative value turns the
	// check off. Either way a body the broker refuses (406, which closes
	// the publishing channel) is reported as not sent, matching
	// ErrMessageTooLarge. Consumer hops are not checked: the broker has
	// already accepted their body.
	MaxMessageSize int
}

type config struct {
	clientName       string
	origin           string
	codec            Codec
	prefetch         int
	maxOutstanding   int
	confirmTimeout   time.Duration
	drainTimeout     time.Duration
	recoveryInterval time.Duration
	recoveryMax      time.Duration
	recoveryAttempts int
	connectTimeout   time.Duration
	heartbeat        time.Duration
	confirms         bool
	waitForRecovery  bool
	retry            RetryPolicy
	logger           *slog.Logger
	publishIcpt      []PublishInterceptor
	consumeIcpt      []ConsumeInterceptor
	tls              *tls.Config
	insecureDev      bool
	credentials      transport.Credentials
	sec              securityConfig
	addresses        []string
	onEvent          func(Event)
	publishChannels  int
	maxMessage       int // as Config.MaxMessageSize: 0 default, negative none
	settlementHooks  []func(Settlement)
	publishHooks     []func(PublishReport)
	fallbackHooks    []func(Fallback)
	telemetry        telemetryConfig
	problems         []error
}

func defaultConfig() config {
	return config{
		clientName:       defaultClientName,
		prefetch:         defaultPrefetch,
		maxOutstanding:   defaultMaxOutstandingPublishes,
		confirmTimeout:   defaultConfirmTimeout,
		drainTimeout:     defaultDrainTimeout,
		recoveryInterval: defaultRecoveryInterval,
		recoveryMax:      defaultRecoveryIntervalMax,
		connectTimeout:   defaultConnectionTimeout,
		heartbeat:        defaultHeartbeat,
		confirms:         true,
		publishChannels:  defaultPublishChannels,
	}
}

func (c *config) problem(option, format string, args ...any) {
	c.problems = append(c.problems, configErr(option, format, args...))
}

// internal validates cfg and lays it over the defaults.
// orNone reads a duration setting whose zero keeps def and whose negative
// means none (0).
func orNone(d, def time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d > 0:
		return d
	}
	return def
}

// overrideOrNone is orNone for a narrower scope's setting: nil (zero) keeps
// the wider scope's, a negative overrides it with none (0).
func overrideOrNone(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	d = orNone(d, 0)
	return &d
}

func (cfg Config) internal() config {
	c := defaultConfig()
	if cfg.ClientName != "" {
		c.clientName = cfg.ClientName
	}
	c.origin = cfg.Origin
	c.codec = cfg.Codec
	if cfg.Prefetch < 0 {
		c.problem("Config.Prefetch", "prefetch %d is below 1; unlimited prefetch is refused, use a bound such as 20", cfg.Prefetch)
	} else if cfg.Prefetch > 0 {
		c.prefetch = cfg.Prefetch
	}
	if cfg.MaxOutstandingPublishes < 0 {
		c.problem("Config.MaxOutstandingPublishes", "the ceiling %d is below 1", cfg.MaxOutstandingPublishes)
	} else if cfg.MaxOutstandingPublishes > 0 {
		c.maxOutstanding = cfg.MaxOutstandingPublishes
	}
	if cfg.ConfirmTimeout < 0 {
		c.problem("Config.ConfirmTimeout", "the confirm timeout %s is not positive", cfg.ConfirmTimeout)
	} else if cfg.ConfirmTimeout > 0 {
		c.confirmTimeout = cfg.ConfirmTimeout
	}
	c.drainTimeout = orNone(cfg.DrainTimeout, c.drainTimeout)
	if cfg.RecoveryInterval < 0 || cfg.RecoveryIntervalMax < 0 || (cfg.RecoveryIntervalMax > 0 && cfg.RecoveryIntervalMax < cfg.RecoveryInterval) {
		c.problem("Config.RecoveryInterval", "initial %s must be positive and max %s at least initial", cfg.RecoveryInterval, cfg.RecoveryIntervalMax)
	}
	if cfg.RecoveryInterval > 0 {
		c.recoveryInterval = cfg.RecoveryInterval
	}
	if cfg.RecoveryIntervalMax > 0 {
		c.recoveryMax = cfg.RecoveryIntervalMax
	}
	if c.recoveryMax < c.recoveryInterval {
		c.recoveryMax = c.recoveryInterval
	}
	if cfg.RecoveryAttempts < 0 {
		c.problem("Config.RecoveryAttempts", "%d attempts is negative; 0 means unlimited", cfg.RecoveryAttempts)
	}
	c.recoveryAttempts = max(cfg.RecoveryAttempts, 0)
	if cfg.ConnectionTimeout < 0 {
		c.problem("Config.ConnectionTimeout", "the timeout %s is not positive", cfg.ConnectionTimeout)
	} else if cfg.ConnectionTimeout > 0 {
		c.connectTimeout = cfg.ConnectionTimeout
	}
	c.heartbeat = orNone(cfg.Heartbeat, c.heartbeat)
	if c.heartbeat > 0 {
		c.heartbeat = (c.heartbeat + time.Second - 1) / time.Second * time.Second
		if c.heartbeat > maxHeartbeat {
			c.problem("Config.Heartbeat", "%s is more than AMQP carries (%s, in whole seconds)", cfg.Heartbeat, maxHeartbeat)
		}
	}
	c.confirms = !cfg.NoPublisherConfirms
	c.waitForRecovery = cfg.WaitForRecovery
	if err := cfg.Retry.Err(); err != nil {
		c.problems = append(c.problems, err)
	}
	c.retry = cfg.Retry
	c.logger = cfg.Logger
	c.publishIcpt = append([]PublishInterceptor(nil), cfg.PublishInterceptors...)
	c.consumeIcpt = append([]ConsumeInterceptor(nil), cfg.ConsumeInterceptors...)
	c.tls = cfg.TLS
	c.insecureDev = cfg.InsecureSkipVerifyForDevelopment
	c.credentials = cfg.Credentials
	c.addresses = append([]string(nil), cfg.Addresses...)
	c.onEvent = cfg.OnEvent
	if cfg.PublishChannels < 0 {
		c.problem("Config.PublishChannels", "%d channels is below 1", cfg.PublishChannels)
	} else if cfg.PublishChannels > 0 {
		c.publishChannels = cfg.PublishChannels
	}
	c.maxMessage = cfg.MaxMessageSize
	if c.maxMessage == 0 {
		c.maxMessage = transport.DefaultMaxMessageSize
	}
	c.maxMessage = max(c.maxMessage, -1)
	if cfg.OnSettlement != nil {
		c.settlementHooks = []func(Settlement){cfg.OnSettlement}
	}
	if cfg.OnPublish != nil {
		c.publishHooks = []func(PublishReport){cfg.OnPublish}
	}
	if cfg.OnFallback != nil {
		c.fallbackHooks = []func(Fallback){cfg.OnFallback}
	}
	switch m := cfg.TLSMode; m {
	case security.ModeAuto, security.ModeRequired, security.ModeDisabled:
		c.sec.settings.Mode = m
	case security.ModeInsecure:
		c.problem("Config.TLSMode", "the insecure mode is set only with Config.InsecureSkipVerifyForDevelopment, so that it reads as the development setting it is; use that field with an amqps:// URL")
	default:
		c.problem("Config.TLSMode", "%v is not a TLS mode; use security.ModeRequired or security.ModeDisabled", m)
	}
	c.sec.settings.AllowDevelopmentCertificates = cfg.DevelopmentCertificates
	c.sec.clientCert = cfg.ClientCertificate
	c.sec.settings.External = cfg.ExternalAuth
	c.sec.settings.Provider = cfg.CredentialsProvider
	c.telemetry = telemetryConfig{meterProvider: cfg.MeterProvider, tracerProvider: cfg.TracerProvider, propagator: cfg.Propagator}
	return c
}

// Config returns the Conn's effective configuration: what Connect was
// given, with every default filled in (the codec, the origin, the logger,
// the telemetry providers, the timeouts). The pattern packages (rpc,
// outbox, schedule, pipeline …) read it to inherit the Conn's settings,
// so one Config instruments and configures everything built on the Conn.
// The slices, hooks and TLS config are the Conn's own: do not modify them.
// Safe for concurrent use.
func (c *Conn) Config() Config {
	k := &c.cfg
	cfg := Config{
		ClientName:                       k.clientName,
		Origin:                           c.origin,
		Codec:                            k.codec,
		Prefetch:                         k.prefetch,
		MaxOutstandingPublishes:          k.maxOutstanding,
		ConfirmTimeout:                   k.confirmTimeout,
		DrainTimeout:                     k.drainTimeout,
		RecoveryInterval:                 k.recoveryInterval,
		RecoveryIntervalMax:              k.recoveryMax,
		RecoveryAttempts:                 k.recoveryAttempts,
		ConnectionTimeout:                k.connectTimeout,
		Heartbeat:                        k.heartbeat,
		NoPublisherConfirms:              !k.confirms,
		WaitForRecovery:                  k.waitForRecovery,
		Retry:                            k.retry,
		Logger:                           c.logger,
		PublishInterceptors:              k.publishIcpt,
		ConsumeInterceptors:              k.consumeIcpt,
		TLS:                              k.tls,
		InsecureSkipVerifyForDevelopment: k.insecureDev,
		Credentials:                      k.credentials,
		TLSMode:                          k.sec.settings.Mode,
		DevelopmentCertificates:          k.sec.settings.AllowDevelopmentCertificates,
		ClientCertificate:                k.sec.clientCert,
		ExternalAuth:                     k.sec.settings.External,
		CredentialsProvider:              k.sec.settings.Provider,
		Addresses:                        k.addresses,
		PublishChannels:                  k.publishChannels,
		MaxMessageSize:                   k.maxMessage,
		OnEvent:                          k.onEvent,
		MeterProvider:                    c.tel.mp,
		TracerProvider:                   c.tel.tp,
		Propagator:                       c.tel.prop,
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = -1 // the sentinel for "do not wait"
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = -1 // the sentinel for "no heartbeats"
	}
	if len(k.settlementHooks) > 0 {
		cfg.OnSettlement = k.settlementHooks[0]
	}
	if len(k.publishHooks) > 0 {
		cfg.OnPublish = k.publishHooks[0]
	}
	if len(k.fallbackHooks) > 0 {
		cfg.OnFallback = k.fallbackHooks[0]
	}
	return cfg
}
