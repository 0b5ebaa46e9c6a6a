package stream

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/sqlstore"
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

// failingStore fails every save until ok is set (a plain
// CheckpointStore: it does not embed MemoryCheckpoints, whose fenced
// SaveAs would be promoted past this Save).
type failingStore struct {
	mem MemoryCheckpoints
	ok  atomic.Bool
}

func (f *failingStore) Load(ctx context.Context, s, r string) (int64, bool, error) {
	return f.mem.Load(ctx, s, r)
}

func (f *failingStore) Save(ctx context.Context, s, r string, off int64) error {
	if !f.ok.Load() {
		return errors.New("disk full")
	}
	return f.mem.Save(ctx, s, r, off)
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

// Both shipped stores never move a checkpoint backwards and let one
// reader hold a name: the newest claim wins, and the overtaken reader's
// saves fail with ErrCheckpointTaken.
func TestCheckpointsNeverMoveBackwardsAndAreFencedByTheNewestClaim(t *testing.T) {
	stores := map[string]func(t *testing.T) FencedCheckpointStore{
		"memory": func(*testing.T) FencedCheckpointStore { return &MemoryCheckpoints{} },
	}
	for _, b := range dbtest.Dialects {
		stores[b.Name] = func(t *testing.T) FencedCheckpointStore {
			db, d := b.Open(t)
			// A table made before the holder column: EnsureSchema adds it.
			old := `CREATE TABLE acemq_stream_checkpoint (stream_name VARCHAR(255) NOT NULL, reader_name VARCHAR(255) NOT NULL, last_offset BIGINT NOT NULL, saved_at BIGINT NOT NULL, PRIMARY KEY (stream_name, reader_name))`
			if d == sqlstore.MySQL {
				old = `CREATE TABLE acemq_stream_checkpoint (stream_name VARBINARY(255) NOT NULL, reader_name VARBINARY(255) NOT NULL, last_offset BIGINT NOT NULL, saved_at BIGINT NOT NULL, PRIMARY KEY (stream_name, reader_name)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`
			}
			if _, err := db.Exec(old); err != nil {
				t.Fatal(err)
			}
			s, err := NewSQLCheckpoints(db, d)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := s.EnsureSchema(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			return s
		}
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			load := func() int64 {
				t.Helper()
				off, ok, err := s.Load(ctx, "orders", "model")
				if err != nil || !ok {
					t.Fatalf("Load = %d %v %v", off, ok, err)
				}
				return off
			}
			if err := s.Save(ctx, "orders", "model", 10); err != nil {
				t.Fatal(err)
			}
			if err := s.Save(ctx, "orders", "model", 5); err != nil || load() != 10 {
				t.Fatalf("a Save behind moved the checkpoint back: %d %v", load(), err)
			}
			if off, ok, err := s.Claim(ctx, "orders", "model", "a"); err != nil || !ok || off != 10 {
				t.Fatalf("Claim a = %d %v %v", off, ok, err)
			}
			if err := s.SaveAs(ctx, "orders", "model", "a", 12); err != nil || load() != 12 {
				t.Fatalf("SaveAs a 12: %d %v", load(), err)
			}
			if off, _, err := s.Claim(ctx, "orders", "model", "b"); err != nil || off != 12 {
				t.Fatalf("Claim b = %d %v", off, err)
			}
			if err := s.SaveAs(ctx, "orders", "model", "a", 20); !errors.Is(err, ErrCheckpointTaken) || load() != 12 {
				t.Fatalf("the overtaken holder's save: %v, checkpoint %d", err, load())
			}
			if err := s.SaveAs(ctx, "orders", "model", "b", 11); err != nil || load() != 12 {
				t.Fatalf("a SaveAs behind: %d %v", load(), err)
			}
			if err := s.SaveAs(ctx, "orders", "model", "b", 13); err != nil || load() != 13 {
				t.Fatalf("SaveAs b 13: %d %v", load(), err)
			}
			if off, ok, err := s.Claim(ctx, "orders", "fresh", "c"); ok || err != nil {
				t.Fatalf("Claim of a new name = %d %v %v, want nothing saved", off, ok, err)
			}
			if _, ok, err := s.Load(ctx, "orders", "fresh"); ok || err != nil {
				t.Fatalf("Load of a claimed name never saved: %v %v", ok, err)
			}
		})
	}
}

// Two readers with one checkpoint name: the second started takes the name
// over, the first stops at its next save (Err, Close say why), and the
// second reads on from the checkpoint. Before, both handled every message
// and the checkpoint could move backwards.
func TestASecondReaderWithTheSameNameTakesItOverAndTheFirstStops(t *testing.T) {
	c := brokertest.Connect(t, "memory://"+t.Name())
	s := newStream(t, c)
	publish(t, c, s, 0, 5)
	store := &MemoryCheckpoints{}
	var a, b log
	ra := read(t, c, s, "projector", recorder(&a), From(First()), Checkpoint(store, 1, 0), LagProbe(0))
	brokertest.Eventually(t, "the first reader read five", func() bool { return a.count() == 5 })
	offs, _ := a.snapshot()
	brokertest.Eventually(t, "the first reader saved", func() bool {
		off, ok, _ := store.Load(context.Background(), s, "projector")
		return ok && off == offs[4]
	})
	rb := read(t, c, s, "projector", recorder(&b), From(First()), Checkpoint(store, 1, 0), LagProbe(0))
	publish(t, c, s, 5, 10)
	brokertest.Eventually(t, "the second reader read the five new ones", func() bool { return b.count() == 5 })
	ascending(t, "the second reader", &b, []int{5, 6, 7, 8, 9})
	brokertest.Eventually(t, "the first reader stopped", func() bool { return ra.Err() != nil })
	if err := ra.Err(); !errors.Is(err, ErrCheckpointTaken) {
		t.Fatalf("the first reader's Err = %v, want ErrCheckpointTaken", err)
	}
	if h := ra.Health(context.Background()); h.Status != acemq.StatusDegraded {
		t.Fatalf("the overtaken reader's health %+v", h)
	}
	if err := rb.Err(); err != nil {
		t.Fatal(err)
	}
	if err := rb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	bo, _ := b.snapshot()
	if off, _, _ := store.Load(context.Background(), s, "projector"); off != bo[4] {
		t.Fatalf("checkpoint %d, want the second reader's %d", off, bo[4])
	}
	if err := ra.Close(context.Background()); !errors.Is(err, ErrCheckpointTaken) {
		t.Fatalf("the first reader's Close = %v", err)
	}
	if off, _, _ := store.Load(context.Background(), s, "projector"); off != bo[4] {
		t.Fatalf("the first reader's Close moved the checkpoint to %d", off)
	}
}
