package acemq

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// Defaults (behaviour §1.2, contract §3.12).
const (
	DefaultPrefetch                = 20
	DefaultMaxOutstandingPublishes = 1000
	DefaultConfirmTimeout          = 10 * time.Second
	DefaultDrainTimeout            = 20 * time.Second
	DefaultRecoveryInterval        = time.Second
	DefaultRecoveryIntervalMax     = 30 * time.Second
	DefaultConnectionTimeout       = 10 * time.Second
	DefaultHeartbeat               = 10 * time.Second
	DefaultPublishChannels         = 4
	DefaultClientName              = "acemq"
	// setAsideBound bounds a set-aside or other consumer hop, detached from
	// the caller's cancellation.
	setAsideBound = 30 * time.Second
	// inProgressDelay is the default hold of an InProgress decision and of
	// the last-resort requeue.
	inProgressDelay = 5 * time.Second
	drainGrace      = 500 * time.Millisecond
)

// Option configures a Conn. Options are validated before anything dials;
// a setting that can never work makes Connect return a *ConfigurationError
// naming it.
type Option func(*config)

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
	settlementHooks  []func(Settlement)
	publishHooks     []func(PublishReport)
	fallbackHooks    []func(Fallback)
	telemetry        telemetryConfig
	problems         []error
}

func defaultConfig() config {
	return config{
		clientName:       DefaultClientName,
		prefetch:         DefaultPrefetch,
		maxOutstanding:   DefaultMaxOutstandingPublishes,
		confirmTimeout:   DefaultConfirmTimeout,
		drainTimeout:     DefaultDrainTimeout,
		recoveryInterval: DefaultRecoveryInterval,
		recoveryMax:      DefaultRecoveryIntervalMax,
		connectTimeout:   DefaultConnectionTimeout,
		heartbeat:        DefaultHeartbeat,
		confirms:         true,
		publishChannels:  DefaultPublishChannels,
	}
}

func (c *config) problem(option, format string, args ...any) {
	c.problems = append(c.problems, configErr(option, format, args...))
}

// WithClientName sets the AMQP connection name operators see and the first
// half of the default origin ({clientName}@{hostname}). Default "acemq".
func WithClientName(name string) Option {
	return func(c *config) {
		if name == "" {
			c.problem("WithClientName", "the client name is empty; give the service's name")
		}
		c.clientName = name
	}
}

// WithOrigin sets the whole origin string stamped on envelopes that carry
// none (default {clientName}@{hostname}).
func WithOrigin(origin string) Option { return func(c *config) { c.origin = origin } }

// WithCodec sets the Conn's default codec (JSON by default). Publishers and
// consumers may override it.
func WithCodec(codec Codec) Option {
	return func(c *config) {
		if codec == nil {
			c.problem("WithCodec", "the codec is nil")
		}
		c.codec = codec
	}
}

// WithPrefetch sets the default consumer prefetch (20). It must be ≥ 1:
// unlimited prefetch lets the broker push a whole queue into one process.
func WithPrefetch(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.problem("WithPrefetch", "prefetch %d is below 1; unlimited prefetch is refused, use a bound such as 20", n)
		}
		c.prefetch = n
	}
}

// WithMaxOutstandingPublishes sets the connection-wide ceiling on publishes
// waiting for a confirm (1000).
func WithMaxOutstandingPublishes(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.problem("WithMaxOutstandingPublishes", "the ceiling %d is below 1", n)
		}
		c.maxOutstanding = n
	}
}

// WithConfirmTimeout bounds both the wait for an outstanding-publish permit
// and the wait for a written message's confirm (10s).
func WithConfirmTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.problem("WithConfirmTimeout", "the confirm timeout %s is not positive", d)
		}
		c.confirmTimeout = d
	}
}

// WithDrainTimeout sets the one deadline Close spends draining every
// consumer (20s). Zero waits not at all.
func WithDrainTimeout(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.problem("WithDrainTimeout", "the drain timeout %s is negative", d)
		}
		c.drainTimeout = d
	}
}

// WithRecoveryInterval sets the delay before the first recovery attempt and
// the cap it doubles to (1s, 30s).
func WithRecoveryInterval(initial, max time.Duration) Option {
	return func(c *config) {
		if initial <= 0 || max < initial {
			c.problem("WithRecoveryInterval", "initial %s must be positive and max %s at least initial", initial, max)
		}
		c.recoveryInterval, c.recoveryMax = initial, max
	}
}

// WithRecoveryAttempts caps recovery attempts; after the last one fails the
// Conn gives up and closes. 0 (the default) means unlimited.
func WithRecoveryAttempts(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.problem("WithRecoveryAttempts", "%d attempts is negative; 0 means unlimited", n)
		}
		c.recoveryAttempts = n
	}
}

// WithConnectionTimeout bounds each address's dial (TCP, TLS and AMQP
// handshake). Default 10s.
func WithConnectionTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.problem("WithConnectionTimeout", "the timeout %s is not positive", d)
		}
		c.connectTimeout = d
	}
}

// WithHeartbeat sets the AMQP heartbeat (10s).
func WithHeartbeat(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.problem("WithHeartbeat", "the heartbeat %s is negative", d)
		}
		c.heartbeat = d
	}
}

// WithoutPublisherConfirms is the one way to turn publisher confirms off
// for application publishes: Send then returns once written (outcome
// "published") and takes no permit. Library hops and mandatory publishes
// stay confirmed.
func WithoutPublisherConfirms() Option { return func(c *config) { c.confirms = false } }

// WithWaitForRecovery makes publishes during a recovery wait for it,
// bounded by their context (or the confirm timeout when the context has no
// deadline), instead of being refused at once. A Send, or a SendAll
// member, whose write meets the loss before the Conn has noticed it
// (nothing written) waits too.
func WithWaitForRecovery() Option { return func(c *config) { c.waitForRecovery = true } }

// WithRetryPolicy sets the default retry policy consumers inherit (NoRetry).
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *config) {
		if err := p.Err(); err != nil {
			c.problems = append(c.problems, err)
		}
		c.retry = p
	}
}

// WithLogger sets the structured logger. The default is slog.Default(), so
// set-aside failures, recoveries and blocks reach the operator without
// wiring; pass DiscardLogger() to silence the library.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// DiscardLogger returns a logger that writes nothing.
func DiscardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// WithPublishInterceptors adds publish interceptors, run in registration
// order before encoding on every application publish.
func WithPublishInterceptors(ics ...PublishInterceptor) Option {
	return func(c *config) { c.publishIcpt = append(c.publishIcpt, ics...) }
}

// WithConsumeInterceptors adds consume interceptors, run in registration
// order before decoding on every delivery.
func WithConsumeInterceptors(ics ...ConsumeInterceptor) Option {
	return func(c *config) { c.consumeIcpt = append(c.consumeIcpt, ics...) }
}

// WithTLS sets the TLS configuration for amqps:// (it must not be given
// with amqp://). Without it amqps:// verifies the broker's chain and host
// name against the system store; a RootCAs pool given here replaces that
// store. Connect works on a copy of cfg and enforces two rules on it:
//
//   - TLS 1.2 or later: a MinVersion below 1.2 is raised to 1.2, and a
//     MaxVersion below 1.2 (a config that could only speak older TLS) is
//     refused with a ConfigurationError.
//   - The broker is always verified: InsecureSkipVerify is refused with a
//     ConfigurationError unless WithInsecureSkipVerifyForDevelopment is
//     also given, so a verify-off tls.Config shared with other clients is
//     never inherited by accident.
func WithTLS(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// WithInsecureSkipVerifyForDevelopment turns off verification of the
// broker's certificate chain and host name for amqps://, for development
// against a broker with a self-signed certificate only. Anyone on the
// network path can then impersonate the broker and read credentials and
// messages. Connect logs a warning when it is used; with amqp:// it is a
// ConfigurationError. It is the only way to connect without verification:
// InsecureSkipVerify in a WithTLS config is refused without it.
func WithInsecureSkipVerifyForDevelopment() Option {
	return func(c *config) { c.insecureDev = true }
}

// WithCredentials sets a credentials provider asked on every dial, so
// rotated passwords need no restart. It cannot be combined with user
// information in the URL.
func WithCredentials(p func(ctx context.Context) (user, password string, err error)) Option {
	return func(c *config) { c.credentials = p }
}

// WithAddresses lists cluster node addresses (host:port) tried in order;
// the URL supplies scheme, vhost and credentials.
func WithAddresses(addrs ...string) Option {
	return func(c *config) { c.addresses = append(c.addresses, addrs...) }
}

// WithEventHandler receives connection events (lost, retrying, recovered,
// gave-up, blocked, unblocked) on a goroutine of its own, in order.
func WithEventHandler(f func(Event)) Option { return func(c *config) { c.onEvent = f } }

// WithPublishChannels sets how many confirm-mode channels publishing
// pipelines across (DefaultPublishChannels).
func WithPublishChannels(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.problem("WithPublishChannels", "%d channels is below 1", n)
		}
		c.publishChannels = n
	}
}

// WithSettlementHook adds a function called once per settled delivery,
// after the engine decided the outcome and before it is carried out. It
// runs on the consumer's goroutine, so it must be fast and goroutine-safe.
func WithSettlementHook(f func(Settlement)) Option {
	return func(c *config) { c.settlementHooks = append(c.settlementHooks, f) }
}

// WithPublishHook adds a function called once per application publish with
// its outcome, before Send returns. It must be fast and goroutine-safe.
func WithPublishHook(f func(PublishReport)) Option {
	return func(c *config) { c.publishHooks = append(c.publishHooks, f) }
}

// WithFallbackHook adds a function told about every hop that could not be
// made: a set-aside that failed or a missing retry rung (alert on both).
func WithFallbackHook(f func(Fallback)) Option {
	return func(c *config) { c.fallbackHooks = append(c.fallbackHooks, f) }
}
