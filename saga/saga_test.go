package saga

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/acemq-go/acemq/saga/internal/dbtest"
	"github.com/acemq-go/acemq/sqlstore"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashRole) != "" { // a saga process of the crash test
		os.Exit(runCrashChild())
	}
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("database/sql.(*DB).connectionOpener"))
}

func forEachDialect(t *testing.T, f func(t *testing.T, db *sql.DB, d sqlstore.Dialect)) {
	for _, b := range dbtest.Dialects {
		t.Run(b.Name, func(t *testing.T) {
			db, d := b.Open(t)
			if err := EnsureSchema(context.Background(), db, d); err != nil {
				t.Fatal(err)
			}
			if err := EnsureSchema(context.Background(), db, d); err != nil {
				t.Fatalf("EnsureSchema is not idempotent: %v", err)
			}
			f(t, db, d)
		})
	}
}

// journal records the calls made, in order.
type journal struct {
	mu    sync.Mutex
	calls []string
	keys  []string
}

func (j *journal) add(what string, c Call) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, what)
	j.keys = append(j.keys, c.IdempotencyKey)
}

func (j *journal) list() []string { j.mu.Lock(); defer j.mu.Unlock(); return slices.Clone(j.calls) }

func ok(j *journal, what string) Func {
	return func(ctx context.Context, c Call) error { j.add(what, c); return nil }
}

func TestDefineValidates(t *testing.T) {
	act := func(context.Context, Call) error { return nil }
	cases := map[string]func() (*Definition, error){
		"a name":      func() (*Definition, error) { return Define(" ", Step{Name: "a", Action: act}) },
		"no steps":    func() (*Definition, error) { return Define("s") },
		"has no name": func() (*Definition, error) { return Define("s", Step{Action: act}) },
		"no action":   func() (*Definition, error) { return Define("s", Step{Name: "a"}) },
		"two steps": func() (*Definition, error) {
			return Define("s", Step{Name: "a", Action: act}, Step{Name: "a", Action: act})
		},
	}
	for want, f := range cases {
		d, err := f()
		if err == nil || d != nil || !strings.HasPrefix(err.Error(), "acemq: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, %v", want, d, err)
		}
	}
	for _, lease := range []time.Duration{0, -time.Second, time.Nanosecond} {
		if _, err := NewRunner(&sql.DB{}, sqlstore.SQLite, WithLease(lease)); err == nil {
			t.Errorf("lease %v accepted", lease)
		}
	}
	d, err := Define("s", Step{Name: "a", Action: act}, Step{Name: "b", Action: act})
	if err != nil || d.Name() != "s" || !slices.Equal(d.Steps(), []string{"a", "b"}) {
		t.Fatalf("valid definition: %v %v", d, err)
	}
}

func TestRunCompletesEveryStepInOrderAndRecordsIt(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		ctx := context.Background()
		j := &journal{}
		def, err := Define("order", Step{Name: "reserve", Action: ok(j, "reserve"), Compensate: ok(j, "unreserve")},
			Step{Name: "charge", Action: ok(j, "charge"), Compensate: ok(j, "refund")})
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewRunner(db, d)
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Run(ctx, def, []byte(`{"order":1}`), "application/json")
		if err != nil || res.Outcome != Completed || res.FailedStep != "" {
			t.Fatalf("run %+v %v", res, err)
		}
		if got := j.list(); !slices.Equal(got, []string{"reserve", "charge"}) {
			t.Fatalf("calls %v", got)
		}
		if want := []string{res.InstanceID + "/reserve", res.InstanceID + "/charge"}; !slices.Equal(j.keys, want) {
			t.Fatalf("keys %v, want %v", j.keys, want)
		}
		inst, err := r.Show(ctx, res.InstanceID)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status != "completed" || inst.LockedBy != "" || string(inst.Subject) != `{"order":1}` || inst.ContentType != "application/json" || len(inst.Steps) != 2 {
			t.Fatalf("instance %+v", inst)
		}
		for _, s := range inst.Steps {
			if s.Status != "done" || s.Attempts != 1 || s.Finished.IsZero() {
				t.Fatalf("step %+v", s)
			}
		}
	})
}

func TestFailureCompensatesCompletedStepsInReverseOnADetachedContext(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		ctx, cancel := context.WithCancel(context.Background())
		j := &journal{}
		var compCtxErr error
		def, err := Define("order",
			Step{Name: "reserve", Action: ok(j, "reserve"), Compensate: func(ctx context.Context, c Call) error {
				compCtxErr = ctx.Err()
				j.add("unreserve", c)
				return nil
			}},
			Step{Name: "notify", Action: ok(j, "notify")},
			Step{Name: "charge", Action: ok(j, "charge"), Compensate: func(ctx context.Context, c Call) error {
				cancel() // the caller gives up while the compensations run
				j.add("refund", c)
				return nil
			}},
			Step{Name: "ship", Action: func(ctx context.Context, c Call) error {
				j.add("ship", c)
				return errors.New("no courier")
			}, Compensate: ok(j, "unship")},
			Step{Name: "never", Action: ok(j, "never")})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := NewRunner(db, d)
		res, err := r.Run(ctx, def, nil, "")
		if err != nil || res.Outcome != Compensated || res.FailedStep != "ship" || !strings.Contains(res.Failure, "no courier") || len(res.Unresolved) != 0 {
			t.Fatalf("run %+v %v", res, err)
		}
		if got, want := j.list(), []string{"reserve", "notify", "charge", "ship", "refund", "unreserve"}; !slices.Equal(got, want) {
			t.Fatalf("calls %v, want %v", got, want)
		}
		if compCtxErr != nil {
			t.Fatalf("a compensation ran on a cancelled context: %v", compCtxErr)
		}
		inst, err := r.Show(context.Background(), res.InstanceID)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"compensated", "no_compensation", "compensated", "failed", "pending"}
		for i, s := range inst.Steps {
			if s.Status != want[i] {
				t.Fatalf("step %d %+v, want %s", i, s, want[i])
			}
		}
		if inst.Status != "compensated" || inst.FailedStep != "ship" {
			t.Fatalf("instance %+v", inst)
		}
	})
}

func TestPanicAndFailingCompensationLeaveItUnresolvedForAnOperator(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		ctx := context.Background()
		j := &journal{}
		var refundBroken = true
		def, _ := Define("order",
			Step{Name: "reserve", Action: ok(j, "reserve"), Compensate: ok(j, "unreserve")},
			Step{Name: "charge", Action: ok(j, "charge"), Compensate: func(ctx context.Context, c Call) error {
				j.add("refund", c)
				if refundBroken {
					panic("refund service down")
				}
				return nil
			}},
			Step{Name: "ship", Action: func(context.Context, Call) error { panic("boom") }})
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer mp.Shutdown(ctx)
		r, err := NewRunner(db, d, WithMeterProvider(mp))
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Run(ctx, def, nil, "")
		if err != nil || res.Outcome != Unresolved || res.FailedStep != "ship" || !strings.Contains(res.Failure, "panicked: boom") || !slices.Equal(res.Unresolved, []string{"charge"}) {
			t.Fatalf("run %+v %v", res, err)
		}
		if got := j.list(); !slices.Equal(got, []string{"reserve", "charge", "refund", "unreserve"}) {
			t.Fatalf("calls %v: a failing compensation must not stop the others", got)
		}
		list, err := r.List(ctx, "unresolved")
		if err != nil || len(list) != 1 || list[0].ID != res.InstanceID {
			t.Fatalf("list %+v %v", list, err)
		}
		// Unresolved is never taken by a sweep.
		if got, err := r.Sweep(ctx); err != nil || len(got) != 0 {
			t.Fatalf("sweep took an unresolved instance: %+v %v", got, err)
		}
		if err := r.Resolve(ctx, "nope", "x"); err == nil {
			t.Fatal("resolved an unknown instance")
		}
		// An operator asks for another compensation; the next sweep runs
		// the failed one only.
		refundBroken = false
		if err := r.Compensate(ctx, res.InstanceID); err != nil {
			t.Fatal(err)
		}
		got, err := r.Sweep(ctx)
		if err != nil || len(got) != 1 || got[0].Outcome != Compensated || got[0].FailedStep != "ship" {
			t.Fatalf("sweep %+v %v", got, err)
		}
		if calls := j.list(); !slices.Equal(calls, []string{"reserve", "charge", "refund", "unreserve", "refund"}) {
			t.Fatalf("calls %v", calls)
		}
		if err := r.Compensate(ctx, res.InstanceID); err == nil {
			t.Fatal("a compensated instance was compensated again")
		}
		// Another one, resolved by hand.
		refundBroken = true
		res2, _ := r.Run(ctx, def, nil, "")
		if err := r.Resolve(ctx, res2.InstanceID, "refunded by hand, ticket 42"); err != nil {
			t.Fatal(err)
		}
		inst, _ := r.Show(ctx, res2.InstanceID)
		if inst.Status != "compensated" || !strings.Contains(inst.Failure, "ticket 42") || inst.Steps[1].Status != "compensation_failed" {
			t.Fatalf("resolved %+v", inst)
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		counts := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != "acemq.saga.run.total" {
					continue
				}
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					o, _ := p.Attributes.Value(attribute.Key("outcome"))
					s, _ := p.Attributes.Value(attribute.Key("saga"))
					counts[s.AsString()+"/"+o.AsString()] = p.Value
				}
			}
		}
		if counts["order/unresolved"] != 2 || counts["order/compensated"] != 1 {
			t.Fatalf("run counter %v", counts)
		}
	})
}

func TestWritesAreFencedByTheLease(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		ctx := context.Background()
		j := &journal{}
		def, _ := Define("order",
			Step{Name: "a", Action: func(ctx context.Context, c Call) error {
				// Another runner takes the instance over meanwhile.
				if _, err := db.ExecContext(ctx, d.Rebind(`UPDATE acemq_saga SET locked_by = 'other:1' WHERE instance_id = ?`), c.InstanceID); err != nil {
					t.Error(err)
				}
				return nil
			}},
			Step{Name: "b", Action: ok(j, "b")})
		r, _ := NewRunner(db, d)
		_, err := r.Run(ctx, def, nil, "")
		if !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("run after losing the lease: %v", err)
		}
		if len(j.list()) != 0 {
			t.Fatalf("a step ran after the lease was lost: %v", j.list())
		}
	})
}
