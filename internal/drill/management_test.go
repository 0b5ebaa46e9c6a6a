package drill

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
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
	err = m.close(ctx, "test")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close after the drill's deadline = %v, want an error wrapping context.DeadlineExceeded", err)
	}
}
