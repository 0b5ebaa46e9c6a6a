package actuator_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
)

// The helpers TestNoSecretAppearsInAnythingAConnPrints needs. The test
// lived in the root package until the actuator became a module of its own
// (its scrape of the actuator's pages kept Prometheus in the root go.mod).

type item struct {
	N int `json:"n"`
}

func randomSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "pw-" + hex.EncodeToString(b)
}

func hostPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(u.Hostname(), u.Port())
}

// brokerUser creates a user with full permissions on / and deletes it at
// cleanup.
func brokerUser(t *testing.T, name, password string) {
	t.Helper()
	mgmt(t, http.MethodPut, "/api/users/"+url.PathEscape(name), map[string]any{"tags": "", "password": password})
	t.Cleanup(func() { mgmt(t, http.MethodDelete, "/api/users/"+url.PathEscape(name), nil) })
	mgmt(t, http.MethodPut, "/api/permissions/%2F/"+url.PathEscape(name), map[string]string{"configure": ".*", "write": ".*", "read": ".*"})
}

// mgmt calls the test node's management HTTP API.
func mgmt(t *testing.T, method, path string, body any) {
	t.Helper()
	u, err := url.Parse(testenv.ManagementURL(t))
	if err != nil {
		t.Fatal(err)
	}
	user := u.User
	u.User = nil
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(u.String(), "/")+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := user.Password()
	req.SetBasicAuth(user.Username(), pw)
	req.Header.Set("Content-Type", "application/json")
	// No keep-alive: no idle connection outlives the test (goleak).
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 15 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("management API %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 && !(method == http.MethodDelete && resp.StatusCode == http.StatusNotFound) {
		t.Fatalf("management API %s %s: %s %s", method, path, resp.Status, data)
	}
}

func withoutUser(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = nil
	return u.String()
}

// classicQueue declares a classic queue of a unique name and deletes it
// (and its dead-letter, parking and retry queues) at cleanup.
func classicQueue(t *testing.T, c *acemq.Conn, prefix string) string {
	t.Helper()
	q := testenv.Unique(prefix)
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := acemq.Connect(ctx, testenv.AMQPURL(t), acemq.Config{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		defer c.Close(ctx)
		for _, n := range []string{q, q + ".dlq", q + ".parked", q + ".retry.1s"} {
			_, _ = c.DeleteQueue(ctx, n)
		}
	})
	return q
}
