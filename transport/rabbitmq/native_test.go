package rabbitmq

import (
	"context"
	"errors"
	"math"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

// withFrames adds frames=v to a broker URL.
func withFrames(t testing.TB, raw, v string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("frames", v)
	u.RawQuery = q.Encode()
	return u.String()
}

// getRaw takes one message from q with amqp091-go alone.
func getRaw(t *testing.T, ch *amqp.Channel, q string) amqp.Delivery {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		d, ok, err := ch.Get(q, true)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if ok {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing in %s within %s", q, wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNativeAndAmqp091PublishesArriveTheSame publishes one message by each
// path and reads both with amqp091-go alone: every property, every header
// value type and the body come out equal, at body sizes around frame_max.
func TestNativeAndAmqp091PublishesArriveTheSame(t *testing.T) {
	native := dial(t, transport.Config{})
	old := dial(t, transport.Config{URL: withFrames(t, testenv.AMQPURL(t), "amqp091")})
	if !native.(*connection).plan.native || old.(*connection).plan.native {
		t.Fatal("frames=amqp091 did not choose amqp091-go's publish path, or the default is not native")
	}
	oc, err := native.(*connection).ownPart(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fm := oc.frameMax
	if fm < 4096 {
		t.Fatalf("frame_max %d was not read from the tune", fm)
	}
	q := tempQueue(t, native, "rabbit.native", nil)
	rch := testenv.RawChannel(t, testenv.AMQPURL(t))

	headers := transport.Table{
		"bool": true, "byte": byte(7), "int8": int8(-8), "int16": int16(-16), "int": 32, "int32": int32(-32),
		"int64": int64(-1) << 40, "uint16": uint16(16), "uint32": uint32(32), "float32": float32(1.5), "float64": 2.25,
		"decimal": amqp.Decimal{Scale: 2, Value: 12345}, "string": "s", "bytes": []byte{0, 1}, "time": time.Unix(1700000000, 0),
		"void": nil, "array": []any{"a", int64(1), transport.Table{"in": "array"}}, "table": transport.Table{"nested": map[string]any{"deep": int16(3)}},
		"map": map[string]any{"plain": "map"},
	}
	for _, size := range []int{0, 1, fm - 8, fm - 7, 3 * fm} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte(i)
		}
		var got [2]amqp.Delivery
		for i, c := range []transport.Connection{native, old} {
			p, err := c.Publisher(context.Background(), true)
			if err != nil {
				t.Fatal(err)
			}
			msg := &transport.Message{RoutingKey: q, Mandatory: true, Body: body, Properties: transport.Properties{
				ContentType: "application/octet-stream", MessageID: "m-1", ReplyTo: "back", DeliveryMode: 2, Priority: 4, Headers: headers}}
			if c := confirmOne(t, p, msg); c.Outcome != transport.Acked {
				t.Fatalf("size %d path %d: %+v", size, i, c)
			}
			_ = p.Close()
			got[i] = getRaw(t, rch, q)
		}
		n, o := got[0], got[1]
		if len(n.Body) != size || string(n.Body) != string(body) || string(o.Body) != string(body) {
			t.Fatalf("size %d: bodies of %d (native) and %d (amqp091) bytes, or not the bytes sent", size, len(n.Body), len(o.Body))
		}
		if n.ContentType != o.ContentType || n.MessageId != o.MessageId || n.ReplyTo != o.ReplyTo ||
			n.DeliveryMode != o.DeliveryMode || n.Priority != o.Priority || n.RoutingKey != o.RoutingKey || n.Exchange != o.Exchange ||
			n.ContentType != "application/octet-stream" || n.MessageId != "m-1" || n.DeliveryMode != 2 || n.Priority != 4 {
			t.Fatalf("size %d: properties differ:\nnative  %+v\namqp091 %+v", size, n, o)
		}
		if !reflect.DeepEqual(n.Headers, o.Headers) || len(n.Headers) != len(headers) {
			t.Fatalf("size %d: headers differ:\nnative  %#v\namqp091 %#v", size, n.Headers, o.Headers)
		}
	}
}

func TestNativePublishRefusesAnUnencodableHeaderAndTheChannelGoesOn(t *testing.T) {
	c := dial(t, transport.Config{})
	q := tempQueue(t, c, "rabbit.unenc", nil)
	p := openPublisher(t, c)
	err := p.Publish(context.Background(), &transport.Message{RoutingKey: q, Properties: transport.Properties{Headers: transport.Table{"n": uint64(math.MaxUint64)}}}, func(transport.Confirmation) {
		t.Error("done called for a publish that was not written")
	})
	if !errors.Is(err, transport.ErrNotWritten) || !errors.Is(err, transport.ErrUnencodable) || !strings.Contains(err.Error(), "uint64") {
		t.Fatalf("error %v, want ErrNotWritten and ErrUnencodable naming the type", err)
	}
	if got := confirmOne(t, p, &transport.Message{RoutingKey: q}); got.Outcome != transport.Acked {
		t.Fatalf("the next publish: %+v", got)
	}
}

func TestNativePublishAfterCloseIsNotWritten(t *testing.T) {
	c := dial(t, transport.Config{})
	p, err := c.Publisher(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	err = p.Publish(context.Background(), &transport.Message{RoutingKey: "q"}, func(transport.Confirmation) {})
	if !errors.Is(err, transport.ErrNotWritten) || !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("publish after close: %v, want ErrNotWritten and ErrClosed", err)
	}
	// The connection is still up: nothing was written on the closed channel.
	if got := confirmOne(t, openPublisher(t, c), &transport.Message{RoutingKey: "q"}); got.Outcome != transport.Acked {
		t.Fatalf("a publish on a new channel: %+v", got)
	}
}

// TestNativePublishAllocatesNothing is a promise: a publish on the native
// path, once its buffers have grown, allocates nothing (a non-confirming
// channel, so the count holds no broker answers read meanwhile).
func TestNativePublishAllocatesNothing(t *testing.T) {
	c := dial(t, transport.Config{URL: withFrames(t, testenv.AMQPURL(t), "native") + "&coalesce=off"})
	q := tempQueue(t, c, "rabbit.allocs", transport.Table{"x-max-length": int32(10)})
	p, err := c.Publisher(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	msg := &transport.Message{RoutingKey: q, Body: make([]byte, 256), Properties: transport.Properties{
		ContentType: "application/json", MessageID: "0190-abcdef", DeliveryMode: 2,
		Headers: transport.Table{"x-attempt": int64(1), "traceparent": "00-abc-def-01"}}}
	ctx := context.Background()
	if n := testing.AllocsPerRun(500, func() {
		if err := p.Publish(ctx, msg, nil); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per publish, want 0", n)
	}
}

func TestTheFramesURLParameter(t *testing.T) {
	for raw, want := range map[string]bool{"amqp://h/": true, "amqp://h/?frames=native": true, "amqp://h/?frames=amqp091": false} {
		if got, err := framesSetting(raw); err != nil || got != want {
			t.Errorf("%s: native %v, %v; want %v", raw, got, err, want)
		}
	}
	if _, err := framesSetting("amqp://h/?frames=other"); err == nil || !strings.Contains(err.Error(), "frames=amqp091") {
		t.Fatalf("a bad frames value: %v", err)
	}
}
