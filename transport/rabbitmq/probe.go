package rabbitmq

import (
	"context"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// probeDialTimeout bounds one TCP connect of a probe.
const probeDialTimeout = 250 * time.Millisecond

// Probe reports whether any of the addresses cfg names accepts a TCP
// connection now (transport.Prober). It opens no AMQP session: the
// connection is closed at once.
func (Driver) Probe(ctx context.Context, cfg transport.Config) bool {
	for _, a := range probeAddrs(cfg) {
		pctx, cancel := context.WithTimeout(ctx, probeDialTimeout)
		var d net.Dialer
		conn, err := d.DialContext(pctx, "tcp", a)
		cancel()
		if err == nil {
			_ = conn.Close()
			return true
		}
	}
	return false
}

// probeAddrs is the host:port list a dial of cfg tries: cfg.Addresses, or
// the URL's host with the scheme's default port (5672, amqps 5671).
func probeAddrs(cfg transport.Config) []string {
	if len(cfg.Addresses) > 0 {
		return cfg.Addresses
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = "5672"
		if strings.EqualFold(u.Scheme, "amqps") {
			port = "5671"
		}
	}
	return []string{net.JoinHostPort(u.Hostname(), port)}
}
