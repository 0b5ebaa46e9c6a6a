// Package queuelist lists a broker's queues with their depths, for the
// command's dlq list and the console's overview. AMQP 0-9-1 cannot list
// queues, so RabbitMQ is asked through its management HTTP API; a
// memory:// broker is read in process.
package queuelist

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/acemq-go/acemq/internal/redact"
	"github.com/acemq-go/acemq/transport/memory"
)

// Depth is one queue and how many messages it holds.
type Depth struct {
	Name     string `json:"name"`
	Messages int    `json:"messages"`
}

// IsMemory reports whether the URL names the in-process broker.
func IsMemory(raw string) bool { return strings.HasPrefix(raw, "memory://") }

// ManagementURL derives the RabbitMQ management API's base URL from an
// AMQP URL: same host and credentials, port 15672 (15671 and https for
// amqps).
func ManagementURL(amqpURL string) (string, error) {
	u, err := url.Parse(amqpURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("cannot derive the management URL from %q; pass --management-url http://user:pass@host:15672/", redact.URL(amqpURL))
	}
	scheme, port := "http", "15672"
	if u.Scheme == "amqps" {
		scheme, port = "https", "15671"
	}
	m := url.URL{Scheme: scheme, User: u.User, Host: u.Hostname() + ":" + port, Path: "/"}
	if m.User == nil {
		m.User = url.UserPassword("guest", "guest")
	}
	return m.String(), nil
}

// VhostOf is the virtual host an AMQP URL names ("/" when none).
func VhostOf(amqpURL string) string {
	u, err := url.Parse(amqpURL)
	if err != nil {
		return "/"
	}
	p := strings.TrimPrefix(u.Path, "/")
	if p == "" {
		return "/"
	}
	if v, err := url.PathUnescape(p); err == nil {
		return v
	}
	return p
}

// MemoryBroker returns the in-process broker a memory:// URL names.
func MemoryBroker(raw string) *memory.Broker {
	u, err := url.Parse(raw)
	name := ""
	if err == nil {
		name = u.Host
		if name == "" {
			name = strings.Trim(u.Opaque+u.Path, "/")
		}
	}
	return memory.Lookup(name)
}

// List lists every queue on the broker with its depth, sorted by name.
// RabbitMQ is asked through the management HTTP API at mgmtURL (derived
// from brokerURL when ""); its counts lag by seconds. A memory:// broker
// is read in process, so a fresh process sees only the queues it declared
// itself (none). Errors are sentences saying what to check.
func List(ctx context.Context, brokerURL, mgmtURL string) ([]Depth, error) {
	if IsMemory(brokerURL) {
		b := MemoryBroker(brokerURL)
		var out []Depth
		for _, n := range b.Queues() {
			info, ok := b.QueueInfo(n)
			if ok {
				out = append(out, Depth{Name: n, Messages: info.Messages})
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out, nil
	}
	if mgmtURL == "" {
		var err error
		if mgmtURL, err = ManagementURL(brokerURL); err != nil {
			return nil, err
		}
	}
	base, err := url.Parse(mgmtURL)
	if err != nil {
		return nil, fmt.Errorf("the management URL %q does not parse; pass --management-url http://user:pass@host:15672/", redact.URL(mgmtURL))
	}
	vhost := VhostOf(brokerURL)
	user := base.User
	base.User = nil
	// The vhost is one escaped path segment ("/" is %2F), so the URL is
	// built as text rather than through url.URL.Path, which would escape
	// the escape.
	endpoint := strings.TrimSuffix(base.String(), "/") + "/api/queues/" + url.PathEscape(vhost) + "?columns=name,messages,messages_ready"
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return nil, err
	}
	if user != nil {
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot list queues: the RabbitMQ management API at %s did not answer (%v); enable the rabbitmq_management plugin or pass --management-url", redact.URL(mgmtURL), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("cannot list queues: the RabbitMQ management API at %s answered %s; check --management-url and that the user may read vhost %q", redact.URL(mgmtURL), resp.Status, vhost)
	}
	var rows []struct {
		Name     string `json:"name"`
		Messages *int   `json:"messages"`
		Ready    *int   `json:"messages_ready"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rows); err != nil {
		return nil, fmt.Errorf("cannot list queues: the management API's answer did not parse (%v); check that --management-url points at RabbitMQ's management API", err)
	}
	out := make([]Depth, 0, len(rows))
	for _, r := range rows {
		d := Depth{Name: r.Name}
		switch {
		case r.Messages != nil:
			d.Messages = *r.Messages
		case r.Ready != nil:
			d.Messages = *r.Ready
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
