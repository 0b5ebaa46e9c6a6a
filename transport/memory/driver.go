package memory

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/acemq-go/acemq/transport"
)

func init() { transport.Register("memory", Driver{}) }

// Driver dials the in-process broker for memory:// URLs. The zero value is
// ready to use and safe for concurrent use.
type Driver struct{}

// Name returns "memory", the transport name used in metric tags.
func (Driver) Name() string { return "memory" }

// Capabilities lists, sorted and in the contract's spelling, what the
// in-process broker supports.
func (Driver) Capabilities() []string {
	return []string{
		"DEAD_LETTER_NATIVE",
		"EXCHANGE_ROUTING",
		"HEADERS_ROUTING",
		"PUBLISHER_CONFIRMS",
		"TOPIC_WILDCARDS",
	}
}

// Dial connects to the broker named by cfg.URL (memory://NAME, with an
// optional query the engine reads, such as confirms=off). The broker is
// created on first use. Dial fails when ctx is done or the URL is not a
// memory:// URL with a name; it always reports address index 0. As on
// RabbitMQ, a connection dialled while the broker is blocked is not told
// so until it publishes (see Broker.Block).
func (Driver) Dial(ctx context.Context, cfg transport.Config) (transport.Connection, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	name, err := parseURL(cfg.URL)
	if err != nil {
		return nil, 0, err
	}
	lim, err := parseLimits(cfg.URL)
	if err != nil {
		return nil, 0, err
	}
	return Lookup(name).connect(cfg, lim), 0, nil
}

// limits are a connection's size limits.
type limits struct {
	// frameMax is the connection's frame_max (the URL's frame_max, else
	// transport.DefaultFrameMax): a publish whose content header frame is
	// larger is refused before it is written, as the RabbitMQ transport
	// refuses one the broker would close the connection for.
	frameMax int
	// brokerMax is the broker's max_message_size (the URL's
	// max_message_size, else transport.DefaultMaxMessageSize, RabbitMQ
	// 4's): a larger body that reaches the broker closes the publishing
	// channel with 406 PRECONDITION_FAILED, as RabbitMQ does.
	brokerMax int
}

// parseLimits reads frame_max and max_message_size from a memory:// URL.
func parseLimits(raw string) (limits, error) {
	l := limits{frameMax: transport.DefaultFrameMax, brokerMax: transport.DefaultMaxMessageSize}
	u, err := url.Parse(raw)
	if err != nil {
		return l, fmt.Errorf("memory: cannot parse URL: %w", err)
	}
	q := u.Query()
	for _, s := range [...]struct {
		name string
		min  int
		to   *int
	}{{"frame_max", 4096, &l.frameMax}, {"max_message_size", 1, &l.brokerMax}} {
		v := q.Get(s.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < s.min {
			return l, fmt.Errorf("memory: the URL's %s is %q; give a whole number of bytes, at least %d", s.name, v, s.min)
		}
		*s.to = n
	}
	return l, nil
}

// CheckURL validates a memory:// URL before any dial and reads the engine
// settings it carries: confirms=off turns publisher confirms off
// (transport.URLChecker). frame_max=N and max_message_size=N set the
// in-process broker's limits for the connection (defaults 131072 and
// 16 MiB, RabbitMQ 4's).
func (Driver) CheckURL(raw string) (transport.URLSettings, error) {
	if _, err := parseURL(raw); err != nil {
		return transport.URLSettings{}, err
	}
	if _, err := parseLimits(raw); err != nil {
		return transport.URLSettings{}, err
	}
	u, _ := url.Parse(raw)
	return transport.URLSettings{ConfirmsOff: u.Query().Get("confirms") == "off"}, nil
}

// parseURL returns the broker name in memory://NAME[?query].
func parseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("memory: cannot parse URL: %w", err)
	}
	if u.Scheme != "memory" {
		return "", fmt.Errorf("memory: URL scheme is %q; use memory://name", u.Scheme)
	}
	name := u.Host
	if name == "" {
		name = strings.Trim(u.Opaque+u.Path, "/")
	}
	if name == "" {
		return "", fmt.Errorf("memory: URL %q names no broker; use memory://name", raw)
	}
	for k := range u.Query() {
		if k != "confirms" && k != "frame_max" && k != "max_message_size" {
			return "", fmt.Errorf("memory: unknown URL parameter %q; memory:// understands confirms, frame_max and max_message_size", k)
		}
	}
	return name, nil
}
