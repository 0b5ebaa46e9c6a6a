package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/memory"
)

// queueDepth is one queue and how many messages it holds.
type queueDepth struct {
	Name     string `json:"name"`
	Messages int    `json:"messages"`
}

// managementURL derives the RabbitMQ management API's base URL from an AMQP
// URL: same host and credentials, port 15672 (15671 and https for amqps).
func managementURL(amqpURL string) (string, error) {
	u, err := url.Parse(amqpURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("cannot derive the management URL from %q; pass --management-url http://user:pass@host:15672/", redact(amqpURL))
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

// vhostOf is the virtual host an AMQP URL names ("/" when none).
func vhostOf(amqpURL string) string {
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

// memoryBroker returns the in-process broker a memory:// URL names.
func memoryBroker(raw string) *memory.Broker {
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

// listQueues lists every queue on the broker with its depth. RabbitMQ is
// asked through the management HTTP API (AMQP cannot list queues); a
// memory:// broker is read in process, so a fresh process sees only the
// queues it declared itself (none).
func listQueues(ctx context.Context, brokerURL, mgmtURL string) ([]queueDepth, error) {
	if isMemory(brokerURL) {
		b := memoryBroker(brokerURL)
		var out []queueDepth
		for _, n := range b.Queues() {
			info, ok := b.QueueInfo(n)
			if ok {
				out = append(out, queueDepth{Name: n, Messages: info.Messages})
			}
		}
		return out, nil
	}
	if mgmtURL == "" {
		var err error
		if mgmtURL, err = managementURL(brokerURL); err != nil {
			return nil, err
		}
	}
	base, err := url.Parse(mgmtURL)
	if err != nil {
		return nil, fmt.Errorf("the management URL %q does not parse; pass --management-url http://user:pass@host:15672/", redact(mgmtURL))
	}
	vhost := vhostOf(brokerURL)
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
		return nil, fmt.Errorf("cannot list queues: the RabbitMQ management API at %s did not answer (%v); enable the rabbitmq_management plugin or pass --management-url", redact(mgmtURL), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("cannot list queues: the RabbitMQ management API at %s answered %s; check --management-url and that the user may read vhost %q", redact(mgmtURL), resp.Status, vhost)
	}
	var rows []struct {
		Name     string `json:"name"`
		Messages *int   `json:"messages"`
		Ready    *int   `json:"messages_ready"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rows); err != nil {
		return nil, fmt.Errorf("cannot list queues: the management API's answer did not parse (%v); check that --management-url points at RabbitMQ's management API", err)
	}
	out := make([]queueDepth, 0, len(rows))
	for _, r := range rows {
		d := queueDepth{Name: r.Name}
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

// isSetAside reports whether q is a {q}.dlq or {q}.parked queue.
func isSetAside(q string) bool {
	return strings.HasSuffix(q, ".dlq") || strings.HasSuffix(q, ".parked")
}

// sourceOf is the source queue of a .dlq/.parked queue.
func sourceOf(q string) string {
	return strings.TrimSuffix(strings.TrimSuffix(q, ".dlq"), ".parked")
}

// requireQueue checks that queue exists and returns its ready count, or a
// sentence saying it does not and what to do.
func requireQueue(ctx context.Context, c *acemq.Conn, queue string) (int, error) {
	info, err := c.QueueInfo(ctx, queue)
	if err != nil {
		if transport.Code(err) == transport.CodeNotFound {
			return 0, fmt.Errorf("queue %q does not exist on the broker; check the name (acemq dlq list shows the dead-letter queues)", queue)
		}
		return 0, fmt.Errorf("cannot inspect queue %q (%s); check the connection and retry", queue, strings.TrimSuffix(sentence(err), "."))
	}
	return info.Messages, nil
}
