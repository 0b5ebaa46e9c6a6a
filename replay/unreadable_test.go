package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/replay"
)

// A message published by another client with a header nested 121 levels
// deep reaches the Go client rewritten (its unreadable headers kept as
// bytes, x-acemq-unreadable saying why) and is parked. Replaying it sends
// it as it was published: the broker then holds x-deep again, byte for
// byte, and neither header of the rewrite. (Before: it was replayed with
// x-deep replaced by acemq-unreadable-headers and x-acemq-unreadable, so
// it was no longer the message that was published.)
func TestReplaySendsUnreadableHeadersAsTheyWerePublished(t *testing.T) {
	u := testenv.AMQPURL(t)
	c := connect(t, u)
	q, _ := setup(t, c, 0)
	parked := acemq.ParkedQueue(q)
	deep := amqp.Table{"leaf": "bottom"}
	for range 120 {
		deep = amqp.Table{"a": deep}
	}
	ch := testenv.RawChannel(t, u)
	if err := ch.Publish("", parked, false, false, amqp.Publishing{MessageId: "deep-1", ContentType: "text/plain", DeliveryMode: 2,
		Headers: amqp.Table{"x-app": "fine", "x-deep": deep, "x-acemq-error": "parked by a test"}, Body: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	// What the Go client reads: the rewrite, with x-deep's bytes kept.
	var kept []byte
	if _, err := replay.Browse(context.Background(), c, parked, 1, func(m *acemq.Pulled) bool {
		kept, _ = m.Headers["acemq-unreadable-headers"].([]byte)
		if !replay.Unreadable(m) {
			t.Error("the parked message does not read as unreadable")
		}
		return true
	}, manage(c)); err != nil || len(kept) == 0 {
		t.Fatalf("browse: %v, kept %d bytes", err, len(kept))
	}
	rep, err := replay.Queue(context.Background(), c, parked, manage(c))
	if err != nil || rep.Moved != 1 {
		t.Fatalf("replay: %v %v", rep, err)
	}
	// What the broker holds now, asked through the management API (which
	// reads any depth).
	headers := peekHeaders(t, q)
	if _, ok := headers["x-deep"]; !ok || headers["x-app"] != "fine" || headers["acemq-replayed-from"] != parked {
		t.Fatalf("the replayed message's headers: %v", keys(headers))
	}
	for _, gone := range []string{"x-acemq-unreadable", "acemq-unreadable-headers", "x-acemq-error"} {
		if _, ok := headers[gone]; ok {
			t.Fatalf("the replayed message carries %s", gone)
		}
	}
	levels := 0
	for v := headers["x-deep"]; ; levels++ {
		m, ok := v.(map[string]any)
		if !ok {
			break
		}
		v = m["a"]
	}
	if levels != 121 {
		t.Fatalf("x-deep nests %d levels, want 121", levels)
	}
	// Byte for byte: read again by the Go client, the kept bytes are the
	// same as before the replay.
	var again []byte
	if _, err := replay.Browse(context.Background(), c, q, 1, func(m *acemq.Pulled) bool {
		again, _ = m.Headers["acemq-unreadable-headers"].([]byte)
		return true
	}, manage(c)); err != nil || !bytes.Equal(again, kept) {
		t.Fatalf("the replayed x-deep is not byte for byte the published one (%v; %d vs %d bytes)", err, len(again), len(kept))
	}
}

// peekHeaders reads the first message of queue through the management API
// (returning it) and gives its headers.
func peekHeaders(t *testing.T, queue string) map[string]any {
	t.Helper()
	base, err := url.Parse(os.Getenv("ACEMQ_TEST_MANAGEMENT_URL"))
	if err != nil || base.Host == "" {
		t.Fatalf("ACEMQ_TEST_MANAGEMENT_URL: %v", err)
	}
	user := base.User
	base.User = nil
	body := `{"count":1,"ackmode":"ack_requeue_true","encoding":"auto"}`
	req, _ := http.NewRequest(http.MethodPost, strings.TrimSuffix(base.String(), "/")+"/api/queues/%2F/"+url.PathEscape(queue)+"/get", strings.NewReader(body))
	pw, _ := user.Password()
	req.SetBasicAuth(user.Username(), pw)
	req.Header.Set("Content-Type", "application/json")
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var got []struct {
		Properties struct {
			Headers map[string]any `json:"headers"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &got); err != nil || len(got) != 1 {
		t.Fatalf("management get: %v %s", err, b)
	}
	return got[0].Properties.Headers
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
