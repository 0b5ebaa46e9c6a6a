package memory

import (
	"context"
	"fmt"
	"net/url"
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
	return Lookup(name).connect(cfg), 0, nil
}

// CheckURL validates a memory:// URL before any dial and reads the engine
// settings it carries: confirms=off turns publisher confirms off
// (transport.URLChecker).
func (Driver) CheckURL(raw string) (transport.URLSettings, error) {
	if _, err := parseURL(raw); err != nil {
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
		if k != "confirms" {
			return "", fmt.Errorf("memory: unknown URL parameter %q; memory:// understands only confirms", k)
		}
	}
	return name, nil
}
