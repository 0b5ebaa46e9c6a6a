package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// forceReconnect closes the drill Conn's connections. Through the
// management HTTP API when env.Management is set: only the connections
// whose client-provided name starts with clientName, each a DELETE
// (milliseconds), which leaves everyone else's connections on a shared
// broker alone. Else `rabbitmqctl close_all_connections`, which closes
// every client's and boots an Erlang VM per call (about a second on an
// idle machine, far more on a loaded one).
func (e Env) forceReconnect(ctx context.Context, m *mgmtCloser, reason string) error {
	if e.Management == "" {
		_, err := e.ctl(ctx, "close_all_connections", reason)
		return err
	}
	return m.close(ctx, reason)
}

// mgmtCloser closes one of a client's connections through the management
// API (for a Conn, one is enough: it drops the other and recovers both).
// The API lists a connection only once the broker has emitted statistics
// for it (every collect_statistics_interval, 5 s by default), and lists a
// closed one for a while after: it waits for want connections it has not
// closed before.
type mgmtCloser struct {
	base   *url.URL
	prefix string
	want   int
	closed map[string]bool
	client *http.Client
}

// stop closes the closer's idle HTTP connections (and their goroutines).
func (m *mgmtCloser) stop() { m.client.CloseIdleConnections() }

func newMgmtCloser(base, prefix string, want int) (*mgmtCloser, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/"))
	if err != nil {
		return nil, fmt.Errorf("acemq: the management URL %q does not parse: %v", base, err)
	}
	return &mgmtCloser{base: u, prefix: prefix, want: want, closed: map[string]bool{},
		client: &http.Client{Transport: &http.Transport{}}}, nil
}

func (m *mgmtCloser) do(ctx context.Context, method, path, reason string) ([]byte, error) {
	ru := *m.base
	ru.User = nil
	req, err := http.NewRequestWithContext(ctx, method, ru.String()+path, nil)
	if err != nil {
		return nil, err
	}
	if m.base.User != nil {
		pw, _ := m.base.User.Password()
		req.SetBasicAuth(m.base.User.Username(), pw)
	}
	if reason != "" {
		req.Header.Set("X-Reason", reason)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

func (m *mgmtCloser) close(parent context.Context, reason string) error {
	ctx, cancel := context.WithTimeout(parent, 30*time.Second)
	defer cancel()
	var names []string
	for {
		b, err := m.do(ctx, http.MethodGet, "/api/connections?columns=name,user_provided_name", "")
		if err != nil {
			return fmt.Errorf("acemq: cannot list the broker's connections through the management API: %w", err)
		}
		var conns []struct {
			Name string `json:"name"`
			User string `json:"user_provided_name"`
		}
		if err := json.Unmarshal(b, &conns); err != nil {
			return fmt.Errorf("acemq: the management API's connection list does not parse: %w", err)
		}
		names = names[:0]
		for _, c := range conns {
			if strings.HasPrefix(c.User, m.prefix) && !m.closed[c.Name] {
				names = append(names, c.Name)
			}
		}
		if len(names) >= m.want && len(names) > 0 {
			break
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			if parent.Err() != nil {
				// The drill's own time ran out while waiting: say that, so the
				// drill can judge what ran instead of blaming the broker.
				return fmt.Errorf("acemq: the drill's time ran out while waiting for the management API to list its connection: %w", parent.Err())
			}
			return fmt.Errorf("acemq: the management API listed %d of the drill's %d connections within 30s", len(names), m.want)
		}
	}
	// Close the first that the broker still has: the statistics can list
	// a connection for a moment after it ended, and deleting that one
	// fails (404, or 500 on RabbitMQ 3.10).
	var last error
	for _, name := range names {
		m.closed[name] = true
		if _, err := m.do(ctx, http.MethodDelete, "/api/connections/"+url.PathEscape(name), reason); err != nil {
			last = err
			continue
		}
		return nil
	}
	return fmt.Errorf("acemq: cannot close the drill's connections through the management API: %w", last)
}
