package drill

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestManagementCloserSaysTheDrillsTimeRanOut: when the drill's own
// deadline ends while the management API has not listed the connection
// yet, the error wraps the deadline, so the soak judges what ran ("the
// time was up after N reconnects") instead of failing on a broker
// complaint. Seen in a full `make drills` on a loaded machine.
func TestManagementCloserSaysTheDrillsTimeRanOut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("[]")) // the broker has not listed the connection yet
	}))
	defer srv.Close()
	m, err := newMgmtCloser(srv.URL, "drill (", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = m.close(ctx, "test", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close after the drill's deadline = %v, want an error wrapping context.DeadlineExceeded", err)
	}
}

// TestManagementCloserListsAgainWhenEveryListedConnectionIsGone: the
// statistics can list a connection that has already ended, and its DELETE
// answers 404; the closer lists again and closes the live one rather than
// failing the drill (a full soak failed on its first reconnect that way).
func TestManagementCloserListsAgainWhenEveryListedConnectionIsGone(t *testing.T) {
	var mu sync.Mutex
	lists, deleted := 0, ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodGet {
			lists++
			if lists == 1 {
				_, _ = w.Write([]byte(`[{"name":"ghost","user_provided_name":"drill (publishing)"}]`))
				return
			}
			_, _ = w.Write([]byte(`[{"name":"ghost","user_provided_name":"drill (publishing)"},{"name":"live","user_provided_name":"drill (consuming)"}]`))
			return
		}
		if strings.HasSuffix(r.URL.Path, "/ghost") {
			http.Error(w, `{"error":"Object Not Found"}`, http.StatusNotFound)
			return
		}
		deleted = r.URL.Path
	}))
	defer srv.Close()
	m, err := newMgmtCloser(srv.URL, "drill (", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.stop()
	if err := m.close(context.Background(), "test", nil); err != nil {
		t.Fatalf("close with a ghost listed first: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if deleted != "/api/connections/live" {
		t.Fatalf("deleted %q, want /api/connections/live", deleted)
	}
}

// TestManagementCloserFindsTheConnectionByItsAddressAtOnce: the statistics
// do not list the new connection yet (they lag about 5 s), or never do (a
// RabbitMQ 4.3 that denies management_metrics_collection lists no
// connection in /api/connections, disable_stats or not); the broker's
// connection tracking does, per user, and the closer finds the drill's
// connection there by the address it comes from and deletes it with
// disable_stats (without it, RabbitMQ 3.10 looks the name up in the
// statistics: 404).
func TestManagementCloserFindsTheConnectionByItsAddressAtOnce(t *testing.T) {
	const mine, other = "127.0.0.1:40001 -> 127.0.0.1:5672", "127.0.0.1:40002 -> 127.0.0.1:5672"
	var mu sync.Mutex
	var deleted []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		tracked := r.URL.Query().Get("disable_stats") == "true"
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/connections/username/drill-user":
			_, _ = w.Write([]byte(`[{"name":"` + other + `","vhost":"/","user":"drill-user"},{"name":"` + mine + `","vhost":"/","user":"drill-user"}]`))
		case r.Method == http.MethodGet:
			_, _ = w.Write([]byte("[]")) // the statistics lag, or are off (4.3)
		case r.Method == http.MethodDelete && tracked:
			deleted = append(deleted, r.URL.Path)
		default:
			http.Error(w, `{"error":"Object Not Found"}`, http.StatusNotFound)
		}
	}))
	defer srv.Close()
	m, err := newMgmtCloser(srv.URL, "drill (", urlUser("amqp://drill-user:pw@127.0.0.1:5672/"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.stop()
	m.byNameAfter = time.Hour // by address only
	from := func() []net.Addr { return []net.Addr{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 40001}} }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.close(ctx, "test", from); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(deleted) != 1 || deleted[0] != "/api/connections/"+mine || m.byAddress != 1 || m.byName != 0 {
		t.Fatalf("deleted %q (by address %d, by name %d), want only /api/connections/%s with disable_stats, by address", deleted, m.byAddress, m.byName, mine)
	}
}

// TestManagementCloserFallsBackToTheClientNameBehindANAT: when the broker
// sees the drill's connections come from other addresses, the closer
// finds the connection by its client-provided name in the statistics.
func TestManagementCloserFallsBackToTheClientNameBehindANAT(t *testing.T) {
	var mu sync.Mutex
	deleted := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		tracked := r.URL.Query().Get("disable_stats") == "true"
		switch {
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/connections/username/"):
			_, _ = w.Write([]byte(`[{"name":"172.17.0.1:40001 -> 172.17.0.2:5672"}]`))
		case r.Method == http.MethodGet:
			_, _ = w.Write([]byte(`[{"name":"172.17.0.1:40001 -> 172.17.0.2:5672","user_provided_name":"drill (publishing)"}]`))
		case r.Method == http.MethodDelete && !tracked:
			deleted = r.URL.Path
		default:
			http.Error(w, "unexpected", http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	m, err := newMgmtCloser(srv.URL, "drill (", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.stop()
	m.byNameAfter = 0
	from := func() []net.Addr { return []net.Addr{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 40001}} }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.close(ctx, "test", from); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if deleted != "/api/connections/172.17.0.1:40001 -> 172.17.0.2:5672" || m.byName != 1 || m.byAddress != 0 {
		t.Fatalf("deleted %q (by address %d, by name %d), want the named connection, by name", deleted, m.byAddress, m.byName)
	}
}
