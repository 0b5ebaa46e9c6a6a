package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// forceReconnect closes one of the drill Conn's connections from the
// broker's side (connection.close, what a user meets when an operator or a
// policy closes it). Through the management HTTP API when env.Management is
// set: only the drill's own connection, found by the address it comes from
// (from, when given) or by its client-provided name, one DELETE
// (milliseconds), which leaves everyone else's connections on a shared
// broker alone. Else `rabbitmqctl close_all_connections`, which closes
// every client's and boots an Erlang VM per call (about a second on an
// idle machine, far more on a loaded one).
func (e Env) forceReconnect(ctx context.Context, m *mgmtCloser, from func() []net.Addr, reason string) error {
	if e.Management == "" {
		_, err := e.ctl(ctx, "close_all_connections", reason)
		return err
	}
	return m.close(ctx, reason, from)
}

// mgmtCloser closes one of a client's connections through the management
// API (for a Conn, one is enough: it drops the other and recovers both).
// The API lists a connection only once the broker has emitted statistics
// for it (every collect_statistics_interval, 5 s by default), and lists a
// closed one for a while after: it waits for want connections it has not
// closed before. Given the addresses the drill's connections come from, it
// finds them at once in the broker's connection tracking instead (close).
// With the deprecated management_metrics_collection denied, RabbitMQ 4.3
// lists no connection in /api/connections at all, statistics or not; the
// tracking is then read per user, which every version answers.
type mgmtCloser struct {
	base   *url.URL
	prefix string
	// user is the broker user the client's connections log in as: the
	// tracking is listed per user (/api/connections/username/{user}).
	user   string
	want   int
	closed map[string]bool
	client *http.Client
	// byAddress and byName count the connections closed through the
	// broker's connection tracking (found by address) and through the
	// statistics (found by client-provided name).
	byAddress, byName int
	// byNameAfter is how long close looks only by address, when given
	// addresses, before it also looks by name (2 s).
	byNameAfter time.Duration
}

// stop closes the closer's idle HTTP connections (and their goroutines).
func (m *mgmtCloser) stop() { m.client.CloseIdleConnections() }

// newMgmtCloser closes connections of the client whose client-provided
// names start with prefix and that log in as user (guest when empty, as an
// AMQP URL without a user does).
func newMgmtCloser(base, prefix, user string, want int) (*mgmtCloser, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/"))
	if err != nil {
		return nil, fmt.Errorf("acemq: the management URL %q does not parse: %v", base, err)
	}
	if user == "" {
		user = "guest"
	}
	return &mgmtCloser{base: u, prefix: prefix, user: user, want: want, closed: map[string]bool{},
		byNameAfter: 2 * time.Second, client: &http.Client{Transport: &http.Transport{}}}, nil
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

// close closes one of the drill's connections through the management API.
// With from (the addresses the broker sees the drill's connections come
// from, the soak's proxy's), it looks first in the broker's own connection
// tracking (the user's connections), which lists a connection the moment the
// broker accepts it; the statistics-based list, which names connections by
// their client-provided name, lists a new one only with the next statistics
// (about 5 s after it opened on RabbitMQ 3.10, whatever
// collect_statistics_interval says). That list is used without from, and
// after 2 s with it, for a broker that sees other addresses (a NAT between).
func (m *mgmtCloser) close(parent context.Context, reason string, from func() []net.Addr) error {
	ctx, cancel := context.WithTimeout(parent, 30*time.Second)
	defer cancel()
	started := time.Now()
	var names []string
	var last error // the last refused DELETE
	for {
		if from != nil {
			done, refused, err := m.closeTracked(ctx, from(), reason)
			if err != nil {
				return err
			}
			if done {
				m.byAddress++
				return nil
			}
			if refused != nil {
				last = refused
			}
		}
		if from == nil || time.Since(started) >= m.byNameAfter {
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
				// Close the first that the broker still has: the statistics can
				// list a connection for a moment after it ended, and deleting
				// that one fails (404, or 500 on RabbitMQ 3.10); when every one
				// listed was such a ghost, list again.
				for _, name := range names {
					m.closed[name] = true
					if _, err := m.do(ctx, http.MethodDelete, "/api/connections/"+url.PathEscape(name), reason); err != nil {
						last = err
						continue
					}
					m.byName++
					return nil
				}
			}
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			if parent.Err() != nil {
				// The drill's own time ran out while waiting: say that, so the
				// drill can judge what ran instead of blaming the broker.
				return fmt.Errorf("acemq: the drill was stopped or its time ran out while waiting for the management API to list its connection: %w", parent.Err())
			}
			if last != nil {
				return fmt.Errorf("acemq: cannot close the drill's connections through the management API within 30s: %w", last)
			}
			return fmt.Errorf("acemq: the management API listed %d of the drill's %d connections within 30s (a RabbitMQ 4.3 that denies management_metrics_collection lists none there: give the drill its connections' addresses, which it finds in the broker's tracking)", len(names), m.want)
		}
	}
}

// closeTracked looks in the broker's connection tracking for a connection
// of m.user from one of addrs and closes the first it can. It reports
// whether it closed one, the last refused DELETE, and an error when the API
// cannot be asked at all. /api/connections/username/{user} reads the
// tracking on RabbitMQ 3.10, 4.0 and 4.3 alike; /api/connections with
// disable_stats does on 3.10 and 4.0, but lists nothing on a 4.3 that
// denies management_metrics_collection.
func (m *mgmtCloser) closeTracked(ctx context.Context, addrs []net.Addr, reason string) (bool, error, error) {
	if len(addrs) == 0 {
		return false, nil, nil
	}
	b, err := m.do(ctx, http.MethodGet, "/api/connections/username/"+url.PathEscape(m.user), "")
	if err != nil {
		return false, nil, fmt.Errorf("acemq: cannot list the broker's tracked connections through the management API: %w", err)
	}
	var conns []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &conns); err != nil {
		return false, nil, fmt.Errorf("acemq: the management API's tracked connection list does not parse: %w", err)
	}
	var refused error
	for _, c := range conns {
		if m.closed[c.Name] || !slices.ContainsFunc(addrs, func(a net.Addr) bool { return connectionFrom(c.Name, a) }) {
			continue
		}
		m.closed[c.Name] = true
		// disable_stats here too: without it the API looks the name up in
		// the statistics, which do not list the connection yet (404).
		if _, err := m.do(ctx, http.MethodDelete, "/api/connections/"+url.PathEscape(c.Name)+"?disable_stats=true", reason); err != nil {
			refused = err
			continue
		}
		return true, nil, nil
	}
	return false, refused, nil
}

// urlUser returns the user an AMQP URL logs in as, "" when it names none
// (or does not parse: the Conn reports that).
func urlUser(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return ""
	}
	return u.User.Username()
}
