package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/internal/wire"
	"github.com/acemq-go/acemq/transport"
)

// nested returns a table nested n levels deep (a table of scalars is 1).
func nested(n int) transport.Table {
	t := transport.Table{"leaf": "x"}
	for i := 1; i < n; i++ {
		t = transport.Table{"a": t}
	}
	return t
}

func wide(n int) transport.Table {
	t := make(transport.Table, n)
	for i := 0; i < n; i++ {
		t[fmt.Sprintf("k%05d", i)] = int32(i)
	}
	return t
}

// The client would close the whole connection on each of these; the guard
// rewrites them so they arrive as ordinary deliveries that carry the
// reason and the original header bytes, and the ones around them arrive
// untouched on the same connection.
func TestUnreadableHeadersArriveRewrittenAndTheConnectionStaysUp(t *testing.T) {
	c := dial(t, transport.Config{})
	q := tempQueue(t, c, "guard", nil)
	p := openPublisher(t, c)
	top := make(transport.Table, 9000)
	for i := 0; i < 9000; i++ {
		top[fmt.Sprintf("h%05d", i)] = "v"
	}
	cases := []struct {
		id      string
		headers transport.Table
		want    string // in the reason; "" for an untouched delivery
		depth   string // the header whose kept bytes decode to the original
	}{
		{"before", transport.Table{"x-app": "1"}, "", ""},
		{"deep", transport.Table{"x-app": "2", "x-deep": nested(40)}, `header "x-deep" nests tables or arrays 40 levels deep, over the limit of 32`, "x-deep"},
		{"wide", transport.Table{"x-app": "3", "x-wide": wide(10000)}, `header "x-wide" holds 10000 entries, over the limit of 8192`, "x-wide"},
		{"array", transport.Table{"x-app": "4", "x-list": []any{nested(33)}}, `header "x-list" nests tables or arrays 34 levels deep`, "x-list"},
		{"top", top, "the headers table holds 9000 entries, over the limit of 8192", ""},
		{"at-limit", transport.Table{"x-app": "5", "x-ok": nested(32)}, "", ""},
		{"after", transport.Table{"x-app": "6"}, "", ""},
	}
	for _, tc := range cases {
		cf := confirmOne(t, p, &transport.Message{RoutingKey: q, Properties: transport.Properties{MessageID: tc.id, ContentType: "text/plain", Headers: tc.headers}, Body: []byte(tc.id)})
		if cf.Outcome != transport.Acked {
			t.Fatalf("publish %s: %v", tc.id, cf.Outcome)
		}
	}
	ch := openChannel(t, c)
	in, err := ch.Consume(context.Background(), transport.ConsumeSpec{Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		d := receive(t, in)
		if d.MessageID != tc.id || string(d.Body) != tc.id || d.ContentType != "text/plain" {
			t.Fatalf("got %q body %q type %q, want %q in order with its body", d.MessageID, d.Body, d.ContentType, tc.id)
		}
		reason, marked := d.Headers[wire.UnreadableHeader].(string)
		if tc.want == "" {
			if marked || d.Headers[wire.KeptHeader] != nil {
				t.Fatalf("%s was rewritten (%q) though the client can read it", tc.id, reason)
			}
			continue
		}
		if !strings.Contains(reason, tc.want) {
			t.Fatalf("%s: reason %q, want it to say %q", tc.id, reason, tc.want)
		}
		kept, _ := d.Headers[wire.KeptHeader].([]byte)
		orig, err := wire.DecodeTable(kept)
		if err != nil {
			t.Fatalf("%s: kept headers do not decode: %v", tc.id, err)
		}
		if tc.depth != "" {
			if d.Headers["x-app"] == nil {
				t.Fatalf("%s: the readable header x-app was not kept in place: %v", tc.id, d.Headers)
			}
			if _, ok := orig[tc.depth]; !ok || len(orig) != 1 {
				t.Fatalf("%s: kept headers hold %d entries, want only %s", tc.id, len(orig), tc.depth)
			}
			if got, want := wire.Deepest(orig[tc.depth], nil), wire.Deepest(map[string]any(tc.headers)[tc.depth], asTable); got != want {
				t.Fatalf("%s: kept value nests %d deep, the original %d", tc.id, got, want)
			}
		} else if len(orig)+len(d.Headers)-2 != 9000 {
			t.Fatalf("top: %d kept + %d readable headers, want all 9000 somewhere", len(orig), len(d.Headers)-2)
		}
	}
	select {
	case <-c.Done():
		t.Fatalf("the connection closed: %v", c.Err())
	default:
	}
}

func asTable(v any) (map[string]any, bool) {
	t, ok := v.(transport.Table)
	return t, ok
}

func TestAClientSideFrameErrorIsNamedAsSuch(t *testing.T) {
	err := fromAMQPError(&amqp.Error{Code: amqp.FrameError, Reason: `Exception (502) Reason: "invalid field or value inside of a frame"`})
	var te *transport.Error
	if !errors.As(err, &te) || te.Code != 501 || te.Server || !strings.Contains(te.Reason, "could not parse a frame the broker sent") || !strings.Contains(te.Reason, "invalid field or value") {
		t.Fatalf("got %#v", err)
	}
	if err := fromAMQPError(&amqp.Error{Code: 320, Reason: "CONNECTION_FORCED", Server: true}); strings.Contains(err.Error(), "parse") {
		t.Fatalf("a broker close was named a frame error: %v", err)
	}
}
