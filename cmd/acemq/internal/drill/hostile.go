package drill

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Where a hostile message must land.
const (
	landHandled = "handled"
	landDLQ     = "dlq"
	landParked  = "parked"
)

// caseHeader names each hostile message so it can be found wherever it
// lands; it is an ordinary application header, carried onto set-aside
// copies.
const caseHeader = "x-drill-case"

// hostileOrder is what the drill's typed consumer expects.
type hostileOrder struct {
	ID  string `json:"id"`
	Qty int    `json:"qty"`
}

// hostileCase is one raw message a careless or hostile publisher could
// send, and where the contract says it lands.
type hostileCase struct {
	name        string
	contentType string
	messageID   string
	headers     map[string]any
	body        []byte
	want        string
	// reason is a fragment the x-acemq-error of a set-aside copy must hold.
	reason string
	// attempt, when non-zero, is the attempt the handler must see.
	attempt int
}

// nested returns a header table nested depth deep.
func nested(depth int) transport.Table {
	t := transport.Table{"leaf": "x"}
	for i := 1; i < depth; i++ {
		t = transport.Table{"level": int32(i), "next": t}
	}
	return t
}

func nestedArray(depth int) []any {
	a := []any{"leaf"}
	for i := 1; i < depth; i++ {
		a = []any{int32(i), a}
	}
	return a
}

func wide(n int) transport.Table {
	t := make(transport.Table, n)
	for i := 0; i < n; i++ {
		t[fmt.Sprintf("k%05d", i)] = int32(i)
	}
	return t
}

// hostileCases are the drill's messages, from the contract's read rules
// (§1.4: tolerant reads, unreadable = absent → default), its codec
// selection (§2.1–2.2: a single-codec consumer is handed every body; a
// body that cannot be read is parked) and its set-aside rules (§8.5).
// Nested tables stay within what amqp091-go parses (32 deep, 8192 entries).
// No NaN or infinite float header: RabbitMQ (3.10 here) cannot parse one
// and closes the publisher's connection, so it never reaches a consumer.
func hostileCases() []hostileCase {
	ok := []byte(`{"id":"o-1","qty":2}`)
	big := append(append([]byte(`{"id":"big","qty":1,"pad":"`), bytes.Repeat([]byte("a"), 4<<20)...), `"}`...)
	bigBad := bytes.Repeat([]byte{0xff}, 4<<20)
	return []hostileCase{
		{name: "plain-json", contentType: "application/json", body: ok, want: landHandled, attempt: 1},
		{name: "no-content-type", body: ok, want: landHandled},
		{name: "unknown-content-type", contentType: "application/x-made-up", body: ok, want: landHandled},
		{name: "content-type-with-params-and-case", contentType: " Application/JSON ; charset=latin1", body: ok, want: landHandled},
		{name: "content-type-garbage", contentType: ";;;\x01", body: ok, want: landHandled},
		{name: "json-declared-text-body", contentType: "application/json", body: []byte("hello, not json"), want: landParked, reason: "could not be decoded"},
		{name: "json-declared-not-utf8", contentType: "application/json", body: []byte{0xff, 0xfe, 0xfd}, want: landParked, reason: "could not be decoded"},
		{name: "text-declared-text-body", contentType: "text/plain; charset=utf-8", body: []byte("hello"), want: landParked, reason: "could not be decoded"},
		{name: "empty-body", contentType: "application/json", body: nil, want: landParked, reason: "could not be decoded"},
		{name: "json-array-for-object", contentType: "application/json", body: []byte(`[1,2,3]`), want: landParked, reason: "could not be decoded"},
		{name: "json-wrong-field-type", contentType: "application/json", body: []byte(`{"id":7,"qty":"two"}`), want: landParked, reason: "could not be decoded"},
		{name: "json-truncated", contentType: "application/json", body: []byte(`{"id":"o-1","qty":`), want: landParked, reason: "could not be decoded"},
		{name: "json-null", contentType: "application/json", body: []byte(`null`), want: landHandled},
		{name: "json-deeply-nested-body", contentType: "application/json", body: []byte(`{"id":"deep","x":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`), want: landHandled},
		{name: "json-too-deep-body", contentType: "application/json", body: []byte(`{"id":"deeper","x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`), want: landParked, reason: "could not be decoded"},
		{name: "large-valid-body-4MiB", contentType: "application/json", body: big, want: landHandled},
		{name: "large-invalid-body-4MiB", contentType: "application/json", body: bigBad, want: landParked, reason: "could not be decoded"},
		{name: "no-acemq-headers-message-id", messageID: "mid-1", body: ok, want: landHandled, attempt: 1},
		{name: "attempt-as-text", body: ok, headers: map[string]any{header.Attempt: "three"}, want: landHandled, attempt: 1},
		{name: "attempt-negative", body: ok, headers: map[string]any{header.Attempt: int64(-5)}, want: landHandled, attempt: 1},
		{name: "attempt-zero", body: ok, headers: map[string]any{header.Attempt: int32(0)}, want: landHandled, attempt: 1},
		{name: "attempt-float", body: ok, headers: map[string]any{header.Attempt: 2.9}, want: landHandled, attempt: 2},
		{name: "attempt-huge", body: ok, headers: map[string]any{header.Attempt: int64(math.MaxInt64)}, want: landHandled},
		{name: "attempt-as-bytes", body: ok, headers: map[string]any{header.Attempt: []byte("4")}, want: landHandled, attempt: 4},
		{name: "attempt-as-table", body: ok, headers: map[string]any{header.Attempt: transport.Table{"n": int32(3)}}, want: landHandled, attempt: 1},
		{name: "attempt-as-bool", body: ok, headers: map[string]any{header.Attempt: true}, want: landHandled, attempt: 1},
		{name: "attempt-void", body: ok, headers: map[string]any{header.Attempt: nil}, want: landHandled, attempt: 1},
		{name: "version-huge-float", body: ok, headers: map[string]any{header.Version: 1e300}, want: landHandled},
		{name: "id-as-integer", body: ok, headers: map[string]any{header.ID: int64(42)}, want: landHandled},
		{name: "id-not-utf8-bytes", body: ok, headers: map[string]any{header.ID: []byte{0xff, 0x00, 0xfe}}, want: landHandled},
		{name: "id-empty", body: ok, headers: map[string]any{header.ID: ""}, want: landHandled},
		{name: "type-as-array", body: ok, headers: map[string]any{header.Type: []any{"a", int32(1)}}, want: landHandled},
		{name: "first-seen-as-text", body: ok, headers: map[string]any{header.FirstSeen: "yesterday"}, want: landHandled},
		{name: "first-seen-epoch-zero", body: ok, headers: map[string]any{header.FirstSeen: int64(0)}, want: landHandled},
		{name: "first-seen-far-future", body: ok, headers: map[string]any{header.FirstSeen: int64(math.MaxInt64)}, want: landHandled},
		{name: "first-seen-timestamp-type", body: ok, headers: map[string]any{header.FirstSeen: time.Unix(0, 0)}, want: landHandled},
		{name: "route-garbage", body: ok, headers: map[string]any{header.Route: ",,", header.RoutePosition: int64(-9)}, want: landHandled},
		{name: "error-header-inbound", body: ok, headers: map[string]any{header.Error: []byte{0xff}}, want: landHandled},
		{name: "unknown-reserved-header", body: ok, headers: map[string]any{"x-acemq-from-the-future": transport.Table{"a": int32(1)}}, want: landHandled},
		{name: "reply-to-as-integer", body: ok, headers: map[string]any{header.ReplyTo: int32(5)}, want: landHandled},
		{name: "replay-stamps-garbage", body: ok, headers: map[string]any{"acemq-replayed-at": "not a time", "acemq-replay-count": "many"}, want: landHandled},
		{name: "traceparent-garbage", body: ok, headers: map[string]any{"traceparent": "00-zz-zz-zz", "tracestate": []byte{0xff}}, want: landHandled},
		{name: "header-table-30-deep", body: ok, headers: map[string]any{"x-app-deep": nested(30)}, want: landHandled},
		{name: "header-array-30-deep", body: ok, headers: map[string]any{"x-app-deep": nestedArray(30)}, want: landHandled},
		{name: "header-table-5000-wide", body: ok, headers: map[string]any{"x-app-wide": wide(5000)}, want: landHandled},
		{name: "every-wire-type", body: ok, headers: map[string]any{
			"b": true, "i8": int8(-1), "u8": uint8(255), "i16": int16(-2), "u16": uint16(2), "i32": int32(-3),
			"u32": uint32(3), "i64": int64(-4), "f32": float32(1.5), "f64": -1e300,
			"bytes": []byte{0, 1, 2}, "dec": amqp.Decimal{Scale: 2, Value: 12345}, "ts": time.Unix(1, 0), "void": nil,
		}, want: landHandled},
		{name: "handler-rejects", body: []byte(`{"id":"reject"}`), want: landDLQ, reason: "the drill's handler rejects this order"},
		{name: "handler-parks", body: []byte(`{"id":"park"}`), want: landParked, reason: "the drill's handler parks this order"},
		{name: "handler-panics", body: []byte(`{"id":"panic"}`), want: landDLQ, reason: "panic"},
		{name: "handler-fatal-retry", body: []byte(`{"id":"fatal"}`), want: landDLQ, reason: "the drill's handler cannot ever handle this order"},
		// An id longer than the 255-byte message_id property: its copies keep
		// it whole in x-acemq-id (it looped for ever before, issue 37).
		{name: "id-256-bytes-rejected", body: []byte(`{"id":"reject"}`), headers: map[string]any{header.ID: strings.Repeat("i", 256)}, want: landDLQ, reason: "the message id is 256 bytes"},
		{name: "id-60000-bytes-rejected", body: []byte(`{"id":"reject"}`), headers: map[string]any{header.ID: strings.Repeat("i", 60000)}, want: landDLQ, reason: "the message id is 60000 bytes"},
		{name: "id-60000-bytes-undecodable", contentType: "application/json", body: []byte("not json"), headers: map[string]any{header.ID: strings.Repeat("j", 60000)}, want: landParked, reason: "the message id is 60000 bytes"},
	}
}

// Hostile runs the hostile-input drill: every message in hostileCases is
// published raw to one queue read by a typed (JSON) consumer. The consumer
// must not panic and must keep running, each message must land where the
// contract says (handled, {q}.dlq, or {q}.parked with a reason), and every
// message must be accounted for exactly once.
func Hostile(ctx context.Context, env Env) *Result {
	res := newResult("hostile")
	start := time.Now()
	defer func() { res.Took = time.Since(start) }()
	if err := hostile(ctx, env, res); err != nil {
		res.Failf("%v", err)
	}
	return res
}

func hostile(ctx context.Context, env Env, res *Result) error {
	cases := hostileCases()
	c, err := env.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	q := unique("drill.hostile")
	dlq, parked := acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		return err
	}
	defer func() {
		for _, name := range []string{q, dlq, parked} {
			_, _ = c.DeleteQueue(context.Background(), name)
		}
	}()
	var mu sync.Mutex
	handled := map[string]int{}
	attempts := map[string]int{}
	k, err := acemq.Consume(ctx, c, q, func(ctx context.Context, m *acemq.Message[hostileOrder]) acemq.Decision {
		name, _ := m.Envelope.Headers()[caseHeader].(string)
		mu.Lock()
		handled[name]++
		attempts[name] = m.Envelope.Attempt
		mu.Unlock()
		switch m.Payload.ID {
		case "reject":
			return acemq.Reject(fmt.Errorf("the drill's handler rejects this order"))
		case "park":
			return acemq.Park(fmt.Errorf("the drill's handler parks this order"))
		case "panic":
			panic("the drill's handler panics on this order")
		case "fatal":
			return acemq.Retry(acemq.Fatal(fmt.Errorf("the drill's handler cannot ever handle this order")))
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Concurrency: 4})
	if err != nil {
		return err
	}
	defer k.Close(context.Background())
	for _, hc := range cases {
		h := map[string]any{caseHeader: hc.name}
		for name, v := range hc.headers {
			h[name] = v
		}
		if err := c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: q, ContentType: hc.contentType, MessageID: hc.messageID, Headers: h, Body: hc.body}); err != nil {
			return fmt.Errorf("publishing case %s: %w", hc.name, err)
		}
	}
	// The consumer keeps running: a plain message after all of them is
	// handled too.
	if err := c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: q, ContentType: "application/json", Headers: map[string]any{caseHeader: "after-all"}, Body: []byte(`{"id":"after"}`)}); err != nil {
		return fmt.Errorf("publishing the last, plain message: %w", err)
	}
	// Done when every case meant to be handled was, the plain message
	// too, and as many copies are set aside as cases meant to be. A sum of
	// both would break early: a case handled and then set aside (a panic,
	// a fatal error) counts in each.
	var toHandle []string
	aside := 0
	for _, hc := range cases {
		if hc.want == landHandled {
			toHandle = append(toHandle, hc.name)
		} else {
			aside++
		}
	}
	toHandle = append(toHandle, "after-all")
	landed := func() (missing []string, setAside int, err error) {
		mu.Lock()
		for _, name := range toHandle {
			if handled[name] == 0 {
				missing = append(missing, name)
			}
		}
		mu.Unlock()
		for _, name := range []string{dlq, parked} {
			info, err := c.QueueInfo(ctx, name)
			if err != nil {
				return nil, 0, err
			}
			setAside += info.Messages
		}
		return missing, setAside, nil
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		missing, setAside, err := landed()
		if err != nil {
			return err
		}
		if len(missing) == 0 && setAside >= aside {
			break
		}
		if time.Now().After(deadline) {
			res.Failf("within 60s %d of %d copies were set aside and %d cases were not handled yet (%s)", setAside, aside, len(missing), strings.Join(missing, ", "))
			break
		}
		_ = sleepCtx(ctx, 10*time.Millisecond)
	}
	if err := k.Stalled(); err != nil {
		res.Failf("the consumer stalled: %v", err)
	}
	if err := k.Close(ctx); err != nil {
		res.Failf("closing the consumer: %v", err)
	}
	setAside := map[string]map[string]string{landDLQ: {}, landParked: {}}
	for where, name := range map[string]string{landDLQ: dlq, landParked: parked} {
		p, err := c.NewPuller(ctx)
		if err != nil {
			return err
		}
		for {
			m, ok, err := p.Pull(ctx, name)
			if err != nil {
				p.Close()
				return err
			}
			if !ok {
				break
			}
			cn, _ := m.Headers[caseHeader].(string)
			if _, dup := setAside[where][cn]; dup {
				res.Failf("case %s is on %s twice", cn, name)
			}
			setAside[where][cn] = m.Envelope.Error
			_ = m.Ack()
		}
		p.Close()
	}
	queued, err := c.QueueInfo(ctx, q)
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	counts := map[string]int{}
	wrong := 0
	for _, hc := range cases {
		var got []string
		if handled[hc.name] > 0 && hc.want == landHandled {
			got = append(got, landHandled)
		}
		for _, where := range []string{landDLQ, landParked} {
			if _, ok := setAside[where][hc.name]; ok {
				got = append(got, where)
			}
		}
		switch {
		case len(got) == 0 && hc.want == landHandled && handled[hc.name] == 0:
			res.Failf("%s: never handled", hc.name)
			wrong++
		case len(got) == 0:
			res.Failf("%s: found on neither %s nor %s, want %s", hc.name, dlq, parked, hc.want)
			wrong++
		case len(got) > 1 || got[0] != hc.want:
			res.Failf("%s: landed %s, want %s", hc.name, strings.Join(got, "+"), hc.want)
			wrong++
		default:
			counts[hc.want]++
			if hc.want != landHandled {
				reason := setAside[hc.want][hc.name]
				if reason == "" || !strings.Contains(reason, hc.reason) {
					res.Failf("%s: set aside with reason %q, want one containing %q", hc.name, reason, hc.reason)
				}
			}
			if hc.want == landHandled && handled[hc.name] != 1 {
				res.Failf("%s: handled %d times", hc.name, handled[hc.name])
			}
			if hc.attempt != 0 && attempts[hc.name] != hc.attempt {
				res.Failf("%s: the handler saw attempt %d, want %d", hc.name, attempts[hc.name], hc.attempt)
			}
		}
	}
	if handled["after-all"] != 1 {
		res.Failf("the plain message sent after the hostile ones was handled %d times, want 1: the consumer stopped", handled["after-all"])
	}
	res.Set("messages", len(cases))
	res.Set("handled", counts[landHandled])
	res.Set("dlq", counts[landDLQ])
	res.Set("parked", counts[landParked])
	res.Set("misplaced", wrong)
	res.Set("left-on-queue", queued.Messages)
	if queued.Messages != 0 {
		res.Failf("%d messages are still on %s", queued.Messages, q)
	}
	return nil
}
