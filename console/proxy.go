package console

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console/internal/safetext"
)

// parseTrusted reads Config.TrustedProxies.
func parseTrusted(identityHeader string, addrs []string) ([]netip.Prefix, error) {
	if identityHeader != "" && len(addrs) == 0 {
		return nil, &acemq.ConfigurationError{Option: "console.Config.TrustedProxies", Reason: fmt.Sprintf("IdentityHeader %s is set but no proxy is trusted to send it; name the proxy's address (e.g. 127.0.0.1), or anyone could claim any name", identityHeader)}
	}
	var out []netip.Prefix
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if p, err := netip.ParsePrefix(a); err == nil {
			out = append(out, p.Masked())
			continue
		}
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return nil, &acemq.ConfigurationError{Option: "console.Config.TrustedProxies", Reason: fmt.Sprintf("%q is neither an IP address nor a CIDR prefix; write 127.0.0.1, ::1 or 10.0.0.0/8", a)}
		}
		ip = ip.Unmap()
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return out, nil
}

// fromTrustedProxy reports whether r comes from a trusted proxy.
func (c *Console) fromTrustedProxy(r *http.Request) bool {
	if len(c.trusted) == 0 {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range c.trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// who is the client and the user the audit log records for r: the peer's
// address, and, from a trusted proxy, the address it forwarded for
// (X-Forwarded-For's last entry) and the identity header it set.
func (c *Console) who(r *http.Request) (client, user string) {
	client = r.RemoteAddr
	if !c.fromTrustedProxy(r) {
		return client, ""
	}
	if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
		parts := strings.Split(xff[len(xff)-1], ",")
		if last := strings.TrimSpace(parts[len(parts)-1]); last != "" {
			client = safetext.Line(last) + " via " + r.RemoteAddr
		}
	}
	if c.cfg.IdentityHeader != "" {
		user = safetext.Line(strings.TrimSpace(r.Header.Get(c.cfg.IdentityHeader)))
	}
	return client, user
}
