package slip

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
)

// The contract's example (§3.8), as the Java, Python and Ruby libraries
// write it.
const contractSlip = `{"steps":[{"exchange":"orders-events","routingKey":"order.charge","name":"charge"},{"exchange":"orders-events","routingKey":"order.ship"}],"done":[{"exchange":"orders-events","routingKey":"order.validate","name":"validate","completedAt":"2026-10-05T12:00:01Z"}]}`

func TestTheContractsSlipReadsAndWritesBackByteForByte(t *testing.T) {
	s, err := Parse([]byte(contractSlip))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Steps) != 2 || s.Steps[0].Name != "charge" || s.Steps[1].Name != "" || len(s.Done) != 1 ||
		!s.Done[0].CompletedAt.Equal(time.Date(2026, 10, 5, 12, 0, 1, 0, time.UTC)) {
		t.Fatalf("parsed %+v", s)
	}
	out, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != contractSlip {
		t.Fatalf("wrote\n%s\nwant\n%s", out, contractSlip)
	}
}

func TestAdvanceMovesTheFirstStepToDoneToTheSecondInUTC(t *testing.T) {
	s, _ := Parse([]byte(contractSlip))
	at := time.Date(2026, 10, 5, 14, 0, 2, 987_000_000, time.FixedZone("CEST", 2*3600))
	next, more := s.Advance(at)
	if !more {
		t.Fatal("a step is left, yet Advance says the run ended")
	}
	out, _ := next.MarshalJSON()
	want := `{"steps":[{"exchange":"orders-events","routingKey":"order.ship"}],"done":[{"exchange":"orders-events","routingKey":"order.validate","name":"validate","completedAt":"2026-10-05T12:00:01Z"},{"exchange":"orders-events","routingKey":"order.charge","name":"charge","completedAt":"2026-10-05T12:00:02Z"}]}`
	if string(out) != want {
		t.Fatalf("advanced:\n%s\nwant\n%s", out, want)
	}
	if len(s.Steps) != 2 || len(s.Done) != 1 {
		t.Fatal("Advance changed the slip it was called on")
	}
	last, more := next.Advance(at)
	if more || len(last.Done) != 3 {
		t.Fatalf("after the last step: more=%v done=%d", more, len(last.Done))
	}
}

func TestANewSlipOmitsAnEmptyDone(t *testing.T) {
	s, err := New(To("", "a", ""), To("x", "b", "bee"))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := s.MarshalJSON()
	if want := `{"steps":[{"exchange":"","routingKey":"a"},{"exchange":"x","routingKey":"b","name":"bee"}]}`; string(out) != want {
		t.Fatalf("%s, want %s", out, want)
	}
	if _, err := New(); err == nil || !strings.Contains(err.Error(), "no step") {
		t.Fatalf("New(): %v", err)
	}
}

func TestParseRefusesWhatCannotBeFollowed(t *testing.T) {
	for in, want := range map[string]string{
		`not json`:                 "not the contract's JSON",
		`{"steps":[]}`:             "no step",
		`{}`:                       "no step",
		`{"steps":[{"name":"x"}]}`: "neither an exchange nor a routing key",
		`{"steps":[{"routingKey":"a"}],"done":[{"routingKey":"b","completedAt":"yesterday"}]}`: "not an RFC 3339 time",
		`{"steps":"a"}`: "not the contract's JSON",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s): %v, want an error containing %q", in, err, want)
		}
	}
}

func TestOfReadsEitherFormAndPrefersTheSlip(t *testing.T) {
	env := acemq.ReadEnvelope(map[string]any{
		"x-acemq-route": "validate,enrich", "x-acemq-route-position": int32(0), "x-acemq-route-id": "r-1",
	}, "validate", "", "")
	if form, _, err := Of(env); err != nil || form != RouteHeaders {
		t.Fatalf("route headers: %v %v", form, err)
	}
	env = acemq.ReadEnvelope(map[string]any{Header: []byte(contractSlip), "x-acemq-route": "a"}, "k", "", "")
	if form, s, err := Of(env); err != nil || form != JSONSlip || s.Steps[0].Name != "charge" {
		t.Fatalf("slip as bytes: %v %v %v", form, s, err)
	}
	env = acemq.ReadEnvelope(map[string]any{"x-acemq-route": "a,b", "x-acemq-route-position": int32(2)}, "k", "", "")
	if _, _, err := Of(env); err == nil || !strings.Contains(err.Error(), "past the route") {
		t.Fatalf("position past the end: %v", err)
	}
	if _, _, err := Of(acemq.NewEnvelope()); err == nil || !strings.Contains(err.Error(), "no routing slip") {
		t.Fatalf("no itinerary: %v", err)
	}
}

// follower consumes q with Follow and reports each message it handled.
func follower(t *testing.T, c *acemq.Conn, q string, opts ...acemq.ConsumerConfig) <-chan *acemq.Message[json.RawMessage] {
	t.Helper()
	seen := make(chan *acemq.Message[json.RawMessage], 16)
	k, err := acemq.Consume(context.Background(), c, q, Follow(c, func(_ context.Context, m *acemq.Message[json.RawMessage]) acemq.Decision {
		seen <- m
		return acemq.Accept()
	}), brokertest.First(opts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close(context.Background()) })
	return seen
}

func next(t *testing.T, ch <-chan *acemq.Message[json.RawMessage]) *acemq.Message[json.RawMessage] {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10 s")
		return nil
	}
}

func TestAMessageFollowsItsSlipThroughEveryStep(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		a, b, end := brokertest.Queue(t, c, "slip"), brokertest.Queue(t, c, "slip"), brokertest.Queue(t, c, "slip")
		seenA, seenB := follower(t, c, a), follower(t, c, b)
		s, err := New(To("", a, "validate"), To("", b, "charge"), To("", end, "archive"))
		if err != nil {
			t.Fatal(err)
		}
		sent, err := Start(context.Background(), c, s, map[string]string{"order": "o-1"}, acemq.SendOptions{Headers: map[string]any{"tenant": "acme"}})
		if err != nil {
			t.Fatal(err)
		}
		ma, mb := next(t, seenA), next(t, seenB)
		last := brokertest.Pull(t, c, end)
		if ma.Envelope.ID != sent.Envelope.ID {
			t.Fatalf("step 1 got id %s, sent %s", ma.Envelope.ID, sent.Envelope.ID)
		}
		for i, m := range []acemq.Envelope{mb.Envelope, last.Envelope} {
			parent := []acemq.Envelope{ma.Envelope, mb.Envelope}[i]
			if m.ID == parent.ID || m.CorrelationID != sent.Envelope.CorrelationID || m.CausationID != parent.ID {
				t.Fatalf("hop %d: id %s (parent %s), correlation %s (want %s), causation %s", i+1, m.ID, parent.ID, m.CorrelationID, sent.Envelope.CorrelationID, m.CausationID)
			}
			if v, _ := m.Header("tenant"); v != "acme" {
				t.Fatalf("hop %d lost the application header: %v", i+1, v)
			}
		}
		if string(last.Body) != string(ma.Body) || last.ContentType != ma.ContentType {
			t.Fatalf("the body or content type changed on the way: %q %q", last.Body, last.ContentType)
		}
		_, ls, err := Of(last.Envelope)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls.Steps) != 1 || ls.Steps[0].Name != "archive" || len(ls.Done) != 2 || ls.Done[0].Name != "validate" || ls.Done[1].Name != "charge" || ls.Done[1].CompletedAt.IsZero() {
			t.Fatalf("the slip at the last step: %+v", ls)
		}
		brokertest.Eventually(t, "every step accepted", func() bool { return brokertest.Depth(t, c, a) == 0 && brokertest.Depth(t, c, b) == 0 })
	})
}

func TestTheRouteHeaderFormGoesOnInItsOwnForm(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		pipe := "slip-pipe-" + strings.ReplaceAll(t.Name(), "/", "-")
		qa, qb := pipe+".validate", pipe+".enrich"
		top := acemq.NewTopology().Exchange(pipe, acemq.Direct, acemq.ExchangeOptions{}).
			Queue(qa, acemq.QueueOptions{Type: acemq.Classic}).Queue(qb, acemq.QueueOptions{Type: acemq.Classic}).
			Bind(qa, pipe, "validate").Bind(qb, pipe, "enrich")
		if err := c.Apply(context.Background(), top); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, q := range []string{qa, qb, acemq.DeadLetterQueue(qa), acemq.ParkedQueue(qa)} {
				_, _ = c.DeleteQueue(context.Background(), q)
			}
		})
		seen := follower(t, c, qa)
		// As Java's declared pipeline sends it: route headers, no slip.
		if err := c.PublishRaw(context.Background(), acemq.RawMessage{
			Exchange: pipe, RoutingKey: "validate", ContentType: "application/json", Body: []byte(`{"order":"o-2"}`),
			Headers: map[string]any{"x-acemq-id": "m-1", "x-acemq-route": "validate,enrich", "x-acemq-route-position": int32(0), "x-acemq-route-id": "run-7"},
		}); err != nil {
			t.Fatal(err)
		}
		next(t, seen)
		m := brokertest.Pull(t, c, qb)
		if _, ok := m.Headers[Header]; ok {
			t.Fatal("a route-header message went on with a slip header added")
		}
		e := m.Envelope
		if strings.Join(e.Route, ",") != "validate,enrich" || e.RoutePosition != 1 || e.RouteID != "run-7" || e.CausationID != "m-1" || e.ID == "m-1" {
			t.Fatalf("the hop's route: %v pos %d id %q causation %q message id %q", e.Route, e.RoutePosition, e.RouteID, e.CausationID, e.ID)
		}
	})
}

func TestAnUnreadableSlipIsDeadLetteredNotRetried(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "slip")
		seen := follower(t, c, q, acemq.ConsumerConfig{Retry: acemq.Fixed(5, 10*time.Millisecond)})
		if err := c.PublishRaw(context.Background(), acemq.RawMessage{
			RoutingKey: q, ContentType: "application/json", Body: []byte(`{}`),
			Headers: map[string]any{Header: "{not json"},
		}); err != nil {
			t.Fatal(err)
		}
		m := brokertest.Pull(t, c, acemq.DeadLetterQueue(q))
		if !strings.Contains(m.Envelope.Error, "routing slip") || m.Envelope.Attempt != 1 {
			t.Fatalf("dead letter: error %q attempt %d", m.Envelope.Error, m.Envelope.Attempt)
		}
		select {
		case <-seen:
			t.Fatal("the handler ran on a message with an unreadable slip")
		default:
		}
	})
}

func TestAHopThatCannotBePublishedRetriesAndTheDeadLetterKeepsTheSlip(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "slip")
		handled := follower(t, c, q, acemq.ConsumerConfig{Retry: acemq.Fixed(2, 10*time.Millisecond)})
		s, _ := New(To("", q, "first"), To("", "slip-nowhere-"+q, "gone"))
		if _, err := Start(context.Background(), c, s, "x", acemq.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		next(t, handled)
		next(t, handled) // the retry ran the step again
		m := brokertest.Pull(t, c, acemq.DeadLetterQueue(q))
		if !strings.Contains(m.Envelope.Error, "next step") {
			t.Fatalf("dead letter reason %q", m.Envelope.Error)
		}
		_, ds, err := Of(m.Envelope)
		if err != nil || ds.Steps[0].Name != "first" || len(ds.Done) != 0 {
			t.Fatalf("the dead letter's slip %+v (%v): a replay would not resume at the failed step", ds, err)
		}
	})
}
