package drill

import (
	"context"
	"errors"
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
	m, err := newMgmtCloser(srv.URL, "drill (", 1)
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
	m, err := newMgmtCloser(srv.URL, "drill (", 1)
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
