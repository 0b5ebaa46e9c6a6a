package stream

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/stream/internal/brokertest"
	"github.com/acemq-go/acemq/stream/internal/dbtest"
)

// TestCheckpointResumesAfterTheLastSave: a reader closed after reading
// saves its newest offset; a reader of the same name started again with
// the store reads only what came after, whatever From says.
func TestCheckpointResumesAfterTheLastSave(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		s := newStream(t, c)
		publish(t, c, s, 0, 10)
		store := &MemoryCheckpoints{}
		var first log
		r, err := Read(context.Background(), c, s, "projector", recorder(&first), From(First()), Checkpoint(store, 3, 0))
		if err != nil {
			t.Fatal(err)
		}
		brokertest.Eventually(t, "the first run read ten", func() bool { return first.count() == 10 })
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		offs, _ := first.snapshot()
		if saved, ok, _ := store.Load(context.Background(), s, "projector"); !ok || saved != offs[9] {
			t.Fatalf("checkpoint after Close = %d, %v; want %d (the newest handled)", saved, ok, offs[9])
		}
		publish(t, c, s, 10, 15)
		var second log
		r2 := read(t, c, s, "projector", recorder(&second), From(First()), Checkpoint(store, 3, 0))
		brokertest.Eventually(t, "the second run read the five new ones", func() bool { return second.count() >= 5 })
		ascending(t, "the restarted reader", &second, []int{10, 11, 12, 13, 14})
		if got, ok := r2.Checkpointed(); !ok || got < offs[9] {
			t.Fatalf("Checkpointed() = %d, %v; want at least the loaded %d", got, ok, offs[9])
		}
	})
}

// TestCheckpointSavesEveryNMessages: with every = 4 and the handler held
// at the ninth message, the store holds the fourth's or eighth's offset
// before Close; nothing past the eighth.
func TestCheckpointSavesEveryNMessages(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		s := newStream(t, c)
		publish(t, c, s, 0, 10)
		store := &MemoryCheckpoints{}
		gate := make(chan struct{})
		var l log
		read(t, c, s, "counter", func(ctx context.Context, m *Message[event]) acemq.Decision {
			if m.Payload.N == 8 {
				select {
				case <-gate:
				case <-ctx.Done():
				}
			}
			l.add(m)
			return acemq.Accept()
		}, From(First()), Checkpoint(store, 4, 0), LagProbe(0))
		brokertest.Eventually(t, "eight handled", func() bool { return l.count() == 8 })
		offs, _ := l.snapshot()
		brokertest.Eventually(t, "the eighth message's offset saved", func() bool {
			off, ok, _ := store.Load(context.Background(), s, "counter")
			return ok && off == offs[7]
		})
		close(gate)
	})
}

// TestCheckpointSavesOnATimer: with a count of 0 only the interval saves.
func TestCheckpointSavesOnATimer(t *testing.T) {
	c := brokertest.Connect(t, "memory://"+t.Name())
	s := newStream(t, c)
	publish(t, c, s, 0, 3)
	store := &MemoryCheckpoints{}
	var l log
	r := read(t, c, s, "ticker", recorder(&l), From(First()), Checkpoint(store, 0, 10*time.Millisecond))
	brokertest.Eventually(t, "three handled", func() bool { return l.count() == 3 })
	brokertest.Eventually(t, "the timer saved the third", func() bool {
		off, ok := r.Checkpointed()
		saved, stored, _ := store.Load(context.Background(), s, "ticker")
		return ok && off == 2 && stored && saved == 2
	})
}

// failingStore fails every save until ok is set.
type failingStore struct {
	MemoryCheckpoints
	ok atomic.Bool
}

func (f *failingStore) Save(ctx context.Context, s, r string, off int64) error {
	if !f.ok.Load() {
		return errors.New("disk full")
	}
	return f.MemoryCheckpoints.Save(ctx, s, r, off)
}

// TestCheckpointFailureIsCountedAndRetried: a failed save never stops the
// reader; it is counted, said, and the next save catches up.
func TestCheckpointFailureIsCountedAndRetried(t *testing.T) {
	c := brokertest.Connect(t, "memory://"+t.Name())
	s := newStream(t, c)
	publish(t, c, s, 0, 3)
	store := &failingStore{}
	var l log
	r := read(t, c, s, "unlucky", recorder(&l), From(First()), Checkpoint(store, 1, 0))
	brokertest.Eventually(t, "three handled despite failing saves", func() bool { return l.count() == 3 })
	brokertest.Eventually(t, "a failure counted", func() bool { n, err := r.CheckpointErr(); return n > 0 && err != nil })
	_, err := r.CheckpointErr()
	if !strings.HasPrefix(err.Error(), "acemq: ") || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("CheckpointErr = %v, want the store's error explained", err)
	}
	store.ok.Store(true)
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v (the final save should succeed)", err)
	}
	if off, ok, _ := store.Load(context.Background(), s, "unlucky"); !ok || off != 2 {
		t.Fatalf("after Close the store holds %d, %v; want 2", off, ok)
	}
}

func TestCheckpointRefusesANilStore(t *testing.T) {
	c := brokertest.Connect(t, "memory://"+t.Name())
	s := newStream(t, c)
	_, err := Read(context.Background(), c, s, "r", recorder(&log{}), Checkpoint(nil, 1, 0))
	if err == nil || !strings.Contains(err.Error(), "nil store") {
		t.Fatalf("Read with Checkpoint(nil) = %v, want a refusal naming the nil store", err)
	}
}

// TestSQLCheckpointsOnEveryDialect: load of nothing, save, replace, and
// a reader resuming from the SQL store.
func TestSQLCheckpointsOnEveryDialect(t *testing.T) {
	for _, b := range dbtest.Dialects {
		t.Run(b.Name, func(t *testing.T) {
			db, d := b.Open(t)
			ctx := context.Background()
			store, err := NewSQLCheckpoints(db, d)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // idempotent
				if err := store.EnsureSchema(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if _, ok, err := store.Load(ctx, "orders", "model"); ok || err != nil {
				t.Fatalf("Load of nothing = %v, %v; want not found", ok, err)
			}
			for _, off := range []int64{41, 1 << 40} {
				if err := store.Save(ctx, "orders", "model", off); err != nil {
					t.Fatal(err)
				}
				if got, ok, err := store.Load(ctx, "orders", "model"); !ok || err != nil || got != off {
					t.Fatalf("Load after Save(%d) = %d, %v, %v", off, got, ok, err)
				}
			}
			// Names differing only in case are two readers.
			if _, ok, _ := store.Load(ctx, "orders", "Model"); ok {
				t.Fatal(`"Model" read "model"'s checkpoint`)
			}

			c := brokertest.Connect(t, "memory://"+strings.ReplaceAll(t.Name(), "/", "-"))
			s := newStream(t, c)
			publish(t, c, s, 0, 6)
			if err := store.Save(ctx, s, "sql-reader", 2); err != nil {
				t.Fatal(err)
			}
			var l log
			r := read(t, c, s, "sql-reader", recorder(&l), From(First()), Checkpoint(store, 100, 0))
			brokertest.Eventually(t, "the rest read", func() bool { return l.count() == 3 })
			ascending(t, "resumed from SQL", &l, []int{3, 4, 5})
			if err := r.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if got, _, _ := store.Load(ctx, s, "sql-reader"); got != 5 {
				t.Fatalf("saved on Close = %d, want 5", got)
			}
		})
	}
}

func TestNewSQLCheckpointsRefusesBadInput(t *testing.T) {
	if _, err := NewSQLCheckpoints(nil, 1); err == nil || !strings.HasPrefix(err.Error(), "acemq: ") {
		t.Fatalf("nil db: %v", err)
	}
	db, _ := dbtest.SQLite(t)
	if _, err := NewSQLCheckpoints(db, 0); err == nil || !strings.Contains(err.Error(), "dialect") {
		t.Fatalf("zero dialect: %v", err)
	}
}
