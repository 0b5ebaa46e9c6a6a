// Package transport is the seam between the AceMQ engine and a broker.
//
// It is deliberately narrow, in the way database/sql/driver is: a transport
// moves bytes and reports what the broker said. It never decides retry,
// dead-lettering, timeouts or recovery; the engine in package acemq owns all
// of that and talks to every broker through these interfaces only.
//
// A transport registers itself for one or more URL schemes with Register.
// The memory:// and amqp:// / amqps:// transports are registered by package
// acemq itself, so users never need a blank import for them.
//
// The manual's page on the design (writing a transport): https://github.com/acemq-go/acemq/blob/main/docs/design.md
package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/acemq-go/acemq/security"
)

// Table is an AMQP field table: header values and declaration arguments.
// Values are strings, signed integers of any width, booleans, float64,
// []byte, time.Time, nested Table or []any, as AMQP 0-9-1 allows.
type Table map[string]any

// RawField is one AMQP field value as it travels, its type tag first, for a
// header that must go out byte for byte as it came in: a replay of a
// message whose headers the Go client could not read puts their original
// bytes back this way. The RabbitMQ transport's own publishing connection
// writes it as it is; with frames=amqp091 it is decoded and written again
// (same values, possibly other integer widths); the in-process broker
// holds the values it decodes to.
type RawField []byte

// Properties are the AMQP basic properties AceMQ reads and writes.
type Properties struct {
	ContentType string
	MessageID   string
	// CorrelationID is the AMQP correlation-id property (AceMQ's own
	// correlation travels in a header; this is the property another
	// client may set).
	CorrelationID string
	ReplyTo       string
	DeliveryMode  uint8 // 1 transient, 2 persistent; 0 means transient
	Priority      uint8
	Headers       Table
}

// Message is one publish: where it goes, its flags, properties and body.
type Message struct {
	Exchange   string
	RoutingKey string
	Mandatory  bool
	Properties
	Body []byte
	// HeadersOwned hands the Headers table over to the transport: the
	// caller will neither read nor change the table itself after Publish
	// returns, so a transport may keep it instead of copying it. Values
	// inside it that can change (tables, slices) are still the caller's.
	HeadersOwned bool
}

// Delivery is one message handed to a consumer or returned by Get.
type Delivery struct {
	Properties
	Body        []byte
	Exchange    string
	RoutingKey  string
	Redelivered bool
	DeliveryTag uint64
	ConsumerTag string
	// MessageCount is the number of messages left in the queue after a Get;
	// zero for consumer deliveries.
	MessageCount int
}

// Outcome is the broker's answer to a confirmed publish.
type Outcome uint8

const (
	// Acked: the broker took responsibility for the message.
	Acked Outcome = iota + 1
	// Nacked: the broker refused to take responsibility for it.
	Nacked
	// Returned: a mandatory message reached no queue (basic.return came
	// before the ack).
	Returned
	// Lost: the channel or connection ended before the broker answered;
	// whether the message arrived is unknown.
	Lost
)

// String names the outcome in lower case.
func (o Outcome) String() string {
	switch o {
	case Acked:
		return "acked"
	case Nacked:
		return "nacked"
	case Returned:
		return "returned"
	case Lost:
		return "lost"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Confirmation is what the broker said about one publish.
type Confirmation struct {
	Outcome Outcome
	// ReplyCode and ReplyText are the broker's basic.return fields when
	// Outcome is Returned (312 NO_ROUTE, typically).
	ReplyCode uint16
	ReplyText string
	// Err is the cause when Outcome is Lost.
	Err error
}

// ConfirmFunc receives the answer to one publish. It is called exactly once,
// from a goroutine owned by the transport, and must not block.
type ConfirmFunc func(Confirmation)

// Publisher is a publishing channel. Publish is safe for concurrent use;
// implementations serialise only the frame write, never the confirm wait.
type Publisher interface {
	// Publish writes msg. On a confirming publisher, done is called exactly
	// once with the broker's answer (or Lost when the channel ends first);
	// on a non-confirming publisher done must be nil and is never called.
	//
	// A returned error wrapping ErrNotWritten means nothing was written and
	// done will not be called; any other error means the write may have
	// happened and done will still be called if it was registered.
	//
	// ctx bounds the write, never the wait for the broker's answer: a
	// publish still waiting for the socket when ctx ends writes nothing
	// (ErrNotWritten, wrapping ctx's error), and a write blocked because
	// the broker stopped reading is abandoned when ctx ends; part of a
	// frame may then be on the wire, so the connection is closed and every
	// publish pending on it is answered Lost.
	Publish(ctx context.Context, msg *Message, done ConfirmFunc) error
	// Confirming reports whether the channel is in confirm mode.
	Confirming() bool
	// Done is closed when the channel has ended, for any reason.
	Done() <-chan struct{}
	// Close ends the channel. Pending confirms are answered Lost.
	Close() error
}

// ExchangeKind is an exchange type.
type ExchangeKind string

// The exchange kinds AceMQ declares.
const (
	Direct  ExchangeKind = "direct"
	Topic   ExchangeKind = "topic"
	Fanout  ExchangeKind = "fanout"
	Headers ExchangeKind = "headers"
)

// ExchangeSpec describes an exchange declaration.
type ExchangeSpec struct {
	Name       string
	Kind       ExchangeKind
	Durable    bool
	AutoDelete bool
	Internal   bool
	Passive    bool
	Args       Table
}

// QueueSpec describes a queue declaration. An empty Name asks the broker
// to generate one (returned in QueueInfo.Name).
type QueueSpec struct {
	Name       string
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Passive    bool
	Args       Table
}

// QueueInfo is what the broker reports about a queue.
type QueueInfo struct {
	Name      string
	Messages  int // ready messages
	Consumers int
}

// BindingSpec binds a queue to an exchange.
type BindingSpec struct {
	Queue      string
	Exchange   string
	RoutingKey string
	Args       Table
}

// ConsumeSpec describes a subscription.
type ConsumeSpec struct {
	Queue     string
	Tag       string
	Exclusive bool
	Args      Table
	// ReadOnlyHeaders promises that the subscriber only reads each
	// delivery's Headers, so a transport may hand every delivery of one
	// message the same table instead of a copy each.
	ReadOnlyHeaders bool
}

// Channel is a general-purpose channel: declarations, consuming, pulling
// and settling. Its methods are safe for concurrent use, but a failed
// declaration closes the channel (as AMQP does), so declarations that may
// fail belong on a throwaway channel.
type Channel interface {
	DeclareExchange(ctx context.Context, spec ExchangeSpec) error
	DeleteExchange(ctx context.Context, name string) error
	DeclareQueue(ctx context.Context, spec QueueSpec) (QueueInfo, error)
	DeleteQueue(ctx context.Context, name string) (purged int, err error)
	PurgeQueue(ctx context.Context, name string) (purged int, err error)
	BindQueue(ctx context.Context, spec BindingSpec) error
	UnbindQueue(ctx context.Context, spec BindingSpec) error

	// Qos sets this channel's per-consumer prefetch (never global QoS).
	Qos(prefetch int) error
	// Consume subscribes. Deliveries arrive on the returned channel, which
	// is closed when the subscription is cancelled or the channel ends.
	Consume(ctx context.Context, spec ConsumeSpec) (<-chan Delivery, error)
	// Cancel stops a subscription; deliveries already sent stay unacked.
	Cancel(ctx context.Context, tag string) error
	// Get pulls one message (basic.get, manual ack). ok is false when the
	// queue is empty.
	Get(ctx context.Context, queue string) (d Delivery, ok bool, err error)

	Ack(tag uint64) error
	Nack(tag uint64, requeue bool) error
	Reject(tag uint64, requeue bool) error

	// Done is closed when the channel has ended; Err then says why
	// (nil after a plain Close).
	Done() <-chan struct{}
	Err() error
	Close() error
}

// DirectConsumer is implemented by channels that can hand deliveries to
// the subscriber's own goroutine, converting each one there, instead of
// through a forwarding goroutine: one goroutine hand-off less per delivery.
// The engine uses it when a channel offers it; its semantics are Consume's.
type DirectConsumer interface {
	// ConsumeDirect subscribes like Consume. next blocks until the next
	// delivery and reports false once the subscription is cancelled or the
	// channel has ended. next must be called from one goroutine at a time.
	ConsumeDirect(ctx context.Context, spec ConsumeSpec) (next func() (Delivery, bool), err error)
}

// Pipeliner is implemented by channels that can send declarations without
// waiting for each one's answer (AMQP's no-wait flag), so a recovery that
// re-declares a large topology pays one round trip per channel instead of
// one per declaration. A refusal still closes the channel, as AMQP does;
// it surfaces at the next Sync. The engine uses it when a channel offers
// it, and declares one by one (to say which was refused) when Sync fails.
type Pipeliner interface {
	DeclareExchangeNoWait(spec ExchangeSpec) error
	// DeclareQueueNoWait needs a named queue: a server-named one cannot be
	// declared without waiting for the name.
	DeclareQueueNoWait(spec QueueSpec) error
	BindQueueNoWait(spec BindingSpec) error
	// Sync returns once the broker has processed everything sent on the
	// channel before it: nil, or the channel's close error when a no-wait
	// declaration was refused.
	Sync(ctx context.Context) error
}

// Connection is one broker connection.
type Connection interface {
	// Channel opens a general-purpose channel.
	Channel(ctx context.Context) (Channel, error)
	// Publisher opens a publishing channel, in confirm mode when confirm
	// is true.
	Publisher(ctx context.Context, confirm bool) (Publisher, error)
	// Done is closed when the connection has ended (lost or closed).
	Done() <-chan struct{}
	// Err says why the connection ended; nil after Close.
	Err() error
	// Close closes the connection and every channel on it.
	Close() error
}

// BrokerIdentity is implemented by connections that know what the broker
// said about itself when the connection opened (connection.start's
// server-properties). The engine reads it to use what a version offers
// (RabbitMQ 4.3's delayed retry inside a quorum queue) and to name the
// version where a version matters; a connection without it counts as a
// broker that offers none of that.
type BrokerIdentity interface {
	// Broker returns the broker's product and version ("RabbitMQ",
	// "4.3.6"); empty strings when it did not say (or the part of the
	// connection that heard it has not been dialled).
	Broker() (product, version string)
}

// Purpose says what a caller will open on a connection, so a transport may
// set up only what that needs. Every Connection still serves both Channel
// and Publisher, whatever its Purpose.
type Purpose uint8

const (
	// AnyPurpose is channels and publishers alike (the zero value).
	AnyPurpose Purpose = iota
	// Publishing is publishers only: the engine's publishing connection.
	Publishing
	// Consuming is channels only: declarations, consuming and settling.
	Consuming
)

// Credentials returns the user name and password for one dial.
type Credentials func(ctx context.Context) (user, password string, err error)

// Config is everything a Driver needs to dial.
type Config struct {
	// URL is the URL given to Connect (for memory://, the broker name is
	// its host part).
	URL string
	// Addresses are host:port pairs to try in order; empty means the URL's.
	Addresses []string
	// Start is the index in Addresses to try first (recovery starts at the
	// address after the one lost).
	Start int
	// ConnectionName is the client-provided connection name operators see.
	ConnectionName string
	// Purpose says what the connection will be used for (AnyPurpose when
	// zero).
	Purpose Purpose
	// Product and Version are reported to the broker.
	Product, Version string
	// Heartbeat is the AMQP heartbeat interval asked for: 0 means the
	// driver's default (10s for RabbitMQ), a negative value turns
	// heartbeats off, and a positive value is rounded up to whole seconds
	// (AMQP carries it in seconds). The broker's proposal may lower it.
	Heartbeat time.Duration
	// ConnectTimeout bounds each address (TCP + TLS + AMQP handshake).
	ConnectTimeout time.Duration
	TLS            *tls.Config
	// Credentials, when set, is asked on every dial.
	Credentials Credentials
	// Security carries the TLS mode, the development-certificate policy,
	// the client certificate, EXTERNAL login and a credentials provider
	// (package security). Nil is the zero security.Settings: the mode
	// follows the URL and development certificates are refused.
	Security *security.Settings
	// OnBlocked is told when the broker blocks (active, reason) or unblocks
	// (false, "") the connection. Called from the transport's goroutine;
	// must not block.
	OnBlocked func(active bool, reason string)
}

// Driver dials connections for a URL scheme.
type Driver interface {
	// Name is the transport name used in metric tags: "rabbitmq", "memory".
	Name() string
	// Capabilities lists what the broker supports, in the contract's
	// spelling (PUBLISHER_CONFIRMS, DEAD_LETTER_NATIVE, ...).
	Capabilities() []string
	// Dial opens one connection. It returns the index of the address it
	// connected to (0 when there is only one).
	Dial(ctx context.Context, cfg Config) (conn Connection, addressIndex int, err error)
}

// ErrNotWritten marks a publish error where nothing reached the socket, so
// the message certainly did not arrive.
var ErrNotWritten = errors.New("transport: nothing was written")

// ErrClosed is returned by operations on a closed channel or connection.
// It is acemq.ErrClosed too: one sentinel, whichever layer noticed.
var ErrClosed = errors.New("acemq: the connection or channel has been closed")

// Error is an error the broker reported: a channel or connection close
// with its AMQP reply code and text. errors.As reaches it through the
// engine's errors.
type Error struct {
	Code   int    // AMQP reply code, e.g. 404, 406, 320
	Reason string // the broker's reply text
	// Server is true when the broker closed the channel or connection.
	Server bool
	// Connection is true when the whole connection was closed.
	Connection bool
}

// Error returns the AMQP code and text, saying whether the broker sent it.
func (e *Error) Error() string {
	if e.Server {
		return fmt.Sprintf("broker said %d %s", e.Code, e.Reason)
	}
	return fmt.Sprintf("%d %s", e.Code, e.Reason)
}

// AMQP reply codes the engine branches on.
const (
	CodeContentTooLarge    = 311
	CodeNoRoute            = 312
	CodeConnectionForced   = 320
	CodeAccessRefused      = 403
	CodeNotFound           = 404
	CodeResourceLocked     = 405
	CodePreconditionFailed = 406
	CodeInternalError      = 541
)

// Code returns the AMQP reply code carried by err, or 0.
func Code(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Driver{}
)

// Register makes a driver available for a URL scheme ("memory", "amqp").
// It is meant to be called from init functions. Like database/sql.Register
// (and acemq.RegisterCodec), it panics when d is nil, the scheme is empty,
// or the scheme is already registered: two drivers for one scheme is a
// programming error that would otherwise dial whichever registered last.
func Register(scheme string, d Driver) {
	if d == nil {
		panic("transport: Register driver is nil")
	}
	if scheme == "" {
		panic("transport: Register was given an empty scheme")
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[scheme]; dup {
		panic("transport: Register called twice for scheme " + scheme)
	}
	registry[scheme] = d
}

// Lookup returns the driver registered for scheme.
func Lookup(scheme string) (Driver, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	d, ok := registry[scheme]
	return d, ok
}

// Schemes lists the registered schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for s := range registry {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
