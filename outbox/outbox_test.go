package outbox

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/outbox/internal/alarmtest"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

func TestAddWithoutTransactionIsAnError(t *testing.T) {
	s := newStore(t, backends[0])
	c, _ := memConn(t)
	if _, err := s.Add(context.Background(), nil, c, "", "orders", order{ID: "1"}); err == nil || !strings.Contains(err.Error(), "transaction") {
		t.Fatalf("err = %v, want the missing-transaction error", err)
	}
}

func TestAddRunsOnTheCallersTransactionAndIsIdempotentByID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t)
		env := acemq.NewEnvelope()
		// Rolled back: nothing stays.
		tx, _ := s.DB().BeginTx(ctx, nil)
		if _, err := s.Add(ctx, tx, c, "", "orders", order{ID: "1"}, WithEnvelope(env)); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if p, _ := s.Pending(ctx, 0); len(p) != 0 {
			t.Fatalf("rolled-back Add left %d records", len(p))
		}
		// Same id twice in one transaction, then again in another: one record.
		tx, _ = s.DB().BeginTx(ctx, nil)
		for range 2 {
			if _, err := s.Add(ctx, tx, c, "", "orders", order{ID: "1"}, WithEnvelope(env), WithHeader("x-tenant", "t1")); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		tx, _ = s.DB().BeginTx(ctx, nil)
		if _, err := s.Add(ctx, tx, c, "", "orders", order{ID: "other"}, WithEnvelope(env)); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		p, err := s.Pending(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != 1 {
			t.Fatalf("%d records, want 1", len(p))
		}
		r := p[0]
		if r.ID != env.ID || r.Exchange != "" || r.RoutingKey != "orders" || r.ContentType != "application/json" || string(r.Body) != `{"id":"1","amount":0}` {
			t.Fatalf("record %+v", r)
		}
		if r.Headers[header.Type] != "orders" || r.Headers[header.Origin] != c.Config().Origin || r.Headers["x-tenant"] != "t1" {
			t.Fatalf("headers %v", r.Headers)
		}
		if v, ok := r.Headers[header.Version].(int32); !ok || v != 1 {
			t.Fatalf("version header %T %v, want int32 1 (types survive the JSON column)", r.Headers[header.Version], r.Headers[header.Version])
		}
		if !reflect.DeepEqual(r.Headers, env.WithHeaders(map[string]any{"x-tenant": "t1"}).WireHeaders()) {
			// Origin and type are filled by Add; compare the stored set to a re-render.
			want := env
			want.Type, want.Origin = "orders", c.Config().Origin
			if !reflect.DeepEqual(r.Headers, want.WithHeaders(map[string]any{"x-tenant": "t1"}).WireHeaders()) {
				t.Fatalf("stored headers %v differ from the rendered envelope", r.Headers)
			}
		}
	})
}

func TestRelayPublishesStoredBytesHeadersAndContentTypeUnchangedInOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t, "orders")
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		sent := add(t, s, c, "", "orders", order{"a", 1}, order{"b", 2}, order{"c", 3})
		// A text record too: the stored content type wins over the relay's codec.
		tx, _ := s.DB().BeginTx(ctx, nil)
		env, err := s.Add(ctx, tx, c, "", "orders", "plain words", WithCodec(acemq.Text()))
		if err != nil {
			t.Fatal(err)
		}
		tx.Commit()
		sent = append(sent, env.ID)
		stored, _ := s.Pending(ctx, 0)

		r := newRelay(t, c, s, WithMeterProvider(mp))
		sw := r.SweepOnce(ctx)
		if sw.Err != nil || sw.Published != 4 {
			t.Fatalf("sweep %+v", sw)
		}
		got := drain(t, c, "orders")
		if !slices.Equal(ids(got), sent) {
			t.Fatalf("published %v, want %v in order", ids(got), sent)
		}
		for i, m := range got {
			if string(m.Body) != string(stored[i].Body) || m.ContentType != stored[i].ContentType {
				t.Fatalf("message %d: body %q ct %q, stored %q %q", i, m.Body, m.ContentType, stored[i].Body, stored[i].ContentType)
			}
			for k, v := range stored[i].Headers {
				if !reflect.DeepEqual(m.Headers[k], v) {
					t.Fatalf("message %d header %s = %#v, stored %#v", i, k, m.Headers[k], v)
				}
			}
		}
		if got[3].ContentType != acemq.Text().ContentType() {
			t.Fatalf("text record went out as %q", got[3].ContentType)
		}
		if p, _ := s.Pending(ctx, 0); len(p) != 0 {
			t.Fatalf("%d records left after publishing", len(p))
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		total, lagCount := int64(0), uint64(0)
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Sum[int64]:
					if m.Name == "acemq.outbox.total" {
						for _, p := range d.DataPoints {
							if o, _ := p.Attributes.Value(attribute.Key("outcome")); o.AsString() == "published" {
								total += p.Value
							}
						}
					}
				case metricdata.Histogram[float64]:
					if m.Name == "acemq.outbox.lag" {
						for _, p := range d.DataPoints {
							lagCount += p.Count
							if mn, ok := p.Min.Value(); ok && mn < 0 {
								t.Fatalf("negative lag %v", mn)
							}
						}
					}
				}
			}
		}
		if total != 4 || lagCount != 4 {
			t.Fatalf("acemq.outbox.total{published} = %d, lag count %d; want 4 and 4", total, lagCount)
		}
	})
}

// A relay that dies after the confirm and before the delete leaves the
// record, and the next relay publishes it again: at least once.
func TestRelayKilledBetweenPublishAndDeletePublishesAgain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		clock := &fakeClock{t: time.Now()}
		s.now, s.leaseNow = clock.now, clock.now
		c, _ := memConn(t, "orders")
		sent := add(t, s, c, "", "orders", order{"a", 1}, order{"b", 2})

		dying := newRelay(t, c, s, WithRelayID("dying"))
		dying.afterConfirm = func(id string) error { return errors.New("killed") }
		sw := dying.SweepOnce(ctx)
		if sw.Err == nil || !strings.Contains(sw.Err.Error(), "2 outbox records from "+sent[0]+" were published but not marked, so they will be sent again") {
			t.Fatalf("sweep error %v", sw.Err)
		}
		// The dead relay's lock holds the outbox until it expires.
		next := newRelay(t, c, s, WithRelayID("next"))
		if sw := next.SweepOnce(ctx); sw.Claimed != 0 {
			t.Fatalf("claimed %d records under another relay's live lock", sw.Claimed)
		}
		clock.advance(DefaultLockTTL + time.Second)
		if sw := next.SweepOnce(ctx); sw.Err != nil || sw.Published != 2 {
			t.Fatalf("sweep after the lock expired: %+v", sw)
		}
		got := ids(drain(t, c, "orders"))
		count := map[string]int{}
		for _, id := range got {
			count[id]++
		}
		// The batch was confirmed together and deleted in one statement,
		// which the crash prevented: both go out again.
		if count[sent[0]] != 2 || count[sent[1]] != 2 || len(got) != 4 {
			t.Fatalf("published %v: want %v twice each (at-least-once)", got, sent)
		}
	})
}

// A record that can never go out whatever the broker does (here a header
// over frame_max) is about the record: it spends an attempt a sweep and is
// retired after MaxAttempts, and the records after it go on.
func TestPoisonRecordRetiresAfterTenAttemptsWithoutBlockingOthers(t *testing.T) {
	cases := []struct{ name, exchange, key string }{
		{"over frame_max", "", "orders"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b backend) {
				ctx := context.Background()
				s := newStore(t, b)
				c, _ := memConn(t, "orders")
				tx, err := s.DB().BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				env, err := s.Add(ctx, tx, c, tc.exchange, tc.key, order{"poison", 0}, WithHeader("x-big", strings.Repeat("b", 140000)))
				if err != nil {
					tx.Rollback()
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				poison := env.ID
				good := add(t, s, c, "", "orders", order{"a", 1}, order{"b", 2})
				r := newRelay(t, c, s, WithPublishTimeout(5*time.Second))
				deadline := time.Now().Add(20 * time.Second)
				for failures := 0; failures < MaxAttempts; {
					sw := r.SweepOnce(ctx)
					if sw.Published != 0 || sw.Failed > 1 {
						t.Fatalf("sweep %+v (the batch must stop at the poison record)", sw)
					}
					if sw.Failed == 0 && !acemq.IsPaused(sw.Err) {
						t.Fatalf("sweep %+v: neither the poison failure nor a refusal", sw)
					}
					failures += sw.Failed
					if failures == MaxAttempts && !slices.Equal(sw.Retired, []string{poison}) {
						t.Fatalf("attempt %d retired %v", failures, sw.Retired)
					}
					if time.Now().After(deadline) {
						t.Fatalf("only %d failures before the deadline; last %+v; conn state %v", failures, sw, c.State())
					}
				}
				sw := r.SweepOnce(ctx)
				if sw.Err != nil || sw.Published != 2 {
					t.Fatalf("after retirement: %+v", sw)
				}
				// The first time the poison record failed, the records
				// after it may already have been written (the pipeline);
				// they went out again after it. From then on it was
				// published alone, so nothing more was duplicated.
				got := ids(drain(t, c, "orders"))
				if !slices.Equal(lastCopies(got), good) || len(got) > 2*len(good) {
					t.Fatalf("published %v, want the last copies to be %v, and each at most twice", got, good)
				}
				ret, err := s.Retired(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(ret) != 1 || ret[0].ID != poison || ret[0].Attempts != MaxAttempts || ret[0].LastError == "" || len([]rune(ret[0].LastError)) > 1000 {
					t.Fatalf("retired %+v", ret)
				}
				if sw := r.SweepOnce(ctx); sw.Claimed != 0 {
					t.Fatalf("a retired record was claimed: %+v", sw)
				}
				if err := s.Release(ctx, poison); err != nil {
					t.Fatal(err)
				}
				if err := s.Release(ctx, poison); !errors.Is(err, ErrNotRetired) {
					t.Fatalf("second release: %v", err)
				}
				if p, _ := s.Pending(ctx, 0); len(p) != 1 || p[0].Attempts != 0 {
					t.Fatalf("released record %+v", p)
				}
			})
		})
	}
}

func TestOutageStopsTheSweepWithoutSpendingAnAttempt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, name := memConn(t, "orders")
		broker := memory.Lookup(name)
		sent := add(t, s, c, "", "orders", order{"a", 1}, order{"b", 2})
		r := newRelay(t, c, s, WithPublishTimeout(300*time.Millisecond))
		attempts := func() []int {
			p, err := s.Pending(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			var out []int
			for _, r := range p {
				out = append(out, r.Attempts)
			}
			return out
		}

		held := alarmtest.BlockAndWait(t, c, broker, "low on memory")
		if sw := r.SweepOnce(ctx); !acemq.IsPaused(sw.Err) || sw.Published != 0 || sw.Failed != 0 {
			t.Fatalf("blocked sweep %+v, want it stopped by the paused refusal", sw)
		}
		broker.Unblock()
		alarmtest.HeldConfirms(t, held)
		if a := attempts(); !slices.Equal(a, []int{0, 0}) {
			t.Fatalf("attempts after a block: %v", a)
		}
		drain(t, c, "orders")

		broker.StopConfirming()
		if sw := r.SweepOnce(ctx); sw.Err == nil || sw.Failed != 0 {
			t.Fatalf("unconfirmed sweep %+v", sw)
		}
		broker.DropConnections()
		broker.ResumeConfirming()
		if a := attempts(); !slices.Equal(a, []int{0, 0}) {
			t.Fatalf("attempts after a timeout and a dropped connection: %v", a)
		}
		drain(t, c, "orders")

		// Once the broker is back, everything goes, in order.
		deadline := time.Now().Add(10 * time.Second)
		for published := 0; published < 2; {
			sw := r.SweepOnce(ctx)
			published += sw.Published
			if time.Now().After(deadline) {
				t.Fatalf("not published after recovery: %+v", sw)
			}
		}
		if got := ids(drain(t, c, "orders")); !slices.Equal(got, sent) {
			t.Fatalf("published %v, want %v", got, sent)
		}
	})
}

// A publish to a missing exchange (404 closes the channel) is the
// broker's state (an exchange not declared yet during a deploy), not the
// record's fault: no attempt is spent, the reason is noted and the relay
// is held there.
func TestMissingExchangeHoldsTheRelayWithoutSpendingAnAttempt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t, "orders")
		poison := add(t, s, c, "no-such-exchange", "orders", order{"poison", 0})[0]
		r := newRelay(t, c, s)
		sw := r.SweepOnce(ctx)
		if sw.Failed != 0 || !isMissingExchange(sw.Err) {
			t.Fatalf("sweep %+v", sw)
		}
		p, _ := s.Pending(ctx, 0)
		if len(p) != 1 || p[0].ID != poison || p[0].Attempts != 0 || !strings.Contains(p[0].LastError, "404") {
			t.Fatalf("record %+v", p)
		}
		if err := r.Held(); err == nil || !strings.Contains(err.Error(), poison) {
			t.Fatalf("Held() = %v, want the record named", err)
		}
		// The exchange will never come: an operator retires the record,
		// and the relay goes on.
		if err := s.Retire(ctx, poison, "exchange removed for good"); err != nil {
			t.Fatal(err)
		}
		if err := s.Retire(ctx, poison, ""); !errors.Is(err, ErrNotPending) {
			t.Fatalf("second Retire: %v", err)
		}
		if ret, _ := s.Retired(ctx); len(ret) != 1 || ret[0].ID != poison || ret[0].LastError != "exchange removed for good" {
			t.Fatalf("retired %+v", ret)
		}
		if sw := r.SweepOnce(ctx); sw.Err != nil || sw.Claimed != 0 || r.Held() != nil {
			t.Fatalf("sweep after retiring %+v, held %v", sw, r.Held())
		}
	})
}

// A record's id is its exact text: ids that differ only in case or in a
// trailing space are different records (MySQL's default collations
// compare them equal, so Add kept the first and silently dropped the
// others).
func TestIDsThatDifferOnlyInCaseOrTrailingSpaceAreDifferentRecords(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t)
		want := []string{"Order-A", "order-a", "Order-A "}
		for _, id := range want {
			env := acemq.NewEnvelope()
			env.ID = id
			tx, err := s.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Add(ctx, tx, c, "", "orders", order{ID: id}, WithEnvelope(env)); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		p, err := s.Pending(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range p {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("stored %q, want %q", got, want)
		}
	})
}

// Relay ids are exact too: a relay named "R1" does not take "r1"'s lock
// for its own.
func TestRelayIDsThatDifferOnlyInCaseAreDifferentRelays(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t)
		add(t, s, c, "", "orders", order{"a", 1})
		if recs, _, err := ownerOf(t, s, "r1").claim(ctx, 100, nil, nil); err != nil || len(recs) != 1 {
			t.Fatalf("r1 claimed %d records (%v), want 1", len(recs), err)
		}
		if recs, _, err := ownerOf(t, s, "R1").claim(ctx, 100, nil, nil); err != nil || len(recs) != 0 {
			t.Fatalf("R1 claimed %d records (%v) under r1's live lock, want 0", len(recs), err)
		}
	})
}

// Text in any script survives the store: routing key, headers and the
// last error (a MySQL table in the server's default latin1 refused them).
func TestTextInAnyScriptRoundTrips(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t)
		const key, note, reason = "заказы.注文", "Straße 🧾 注文", "нет маршрута 🚫"
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		env, err := s.Add(ctx, tx, c, "", key, order{ID: "1"}, WithHeader("x-note", note))
		if err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		o := ownerOf(t, s, "r1")
		if recs, _, err := o.claim(ctx, 100, nil, nil); err != nil || len(recs) != 1 {
			t.Fatalf("claimed %d records (%v)", len(recs), err)
		}
		if held, err := o.failed(ctx, env.ID, reason); err != nil || !held {
			t.Fatalf("failed: held %v, %v", held, err)
		}
		p, err := s.Pending(ctx, 0)
		if err != nil || len(p) != 1 {
			t.Fatalf("pending %d records (%v)", len(p), err)
		}
		if r := p[0]; r.RoutingKey != key || r.Headers["x-note"] != note || r.LastError != reason {
			t.Fatalf("stored routing key %q, note %q, last error %q", r.RoutingKey, r.Headers["x-note"], r.LastError)
		}
	})
}

// Headers are stored whole however large (a MySQL TEXT column holds 64 KiB
// and refused more, or cut it short on a non-strict server).
func TestLargeHeadersAreStoredWhole(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t)
		big := strings.Repeat("0123456789", 7000) // 70,000 bytes
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Add(ctx, tx, c, "", "orders", order{ID: "1"}, WithHeader("x-big", big)); err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		p, err := s.Pending(ctx, 0)
		if err != nil || len(p) != 1 || p[0].Headers["x-big"] != big {
			t.Fatalf("pending %d records (%v); the large header did not come back whole", len(p), err)
		}
	})
}
