package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// CheckpointStore keeps, per stream and reader name, the newest offset a
// reader handled, so a reader started again resumes after it. The
// application owns the storage (behaviour spec §7.12); MemoryCheckpoints
// and SQLCheckpoints are the two the package ships. Implementations must
// be safe for concurrent use.
type CheckpointStore interface {
	// Load returns the saved offset for the reader; ok is false when none
	// was saved. An error stops the reader from starting.
	Load(ctx context.Context, stream, reader string) (offset int64, ok bool, err error)
	// Save records offset as the reader's newest handled offset. The
	// shipped stores never move a checkpoint backwards: a Save below the
	// saved offset changes nothing.
	Save(ctx context.Context, stream, reader string, offset int64) error
}

// FencedCheckpointStore is a CheckpointStore that keeps one reader per
// name: each reader started with Checkpoint claims its name with a token
// of its own, which takes the name from any reader that held it (the
// newest reader started wins: a restarted or redeployed reader takes over
// at once, and a reader that never stopped cannot hold the name for
// ever). A save fails with ErrCheckpointTaken once another reader
// claimed the name, and the reader that was overtaken stops. Both shipped
// stores implement it.
type FencedCheckpointStore interface {
	CheckpointStore
	// Claim makes holder the name's reader and returns its saved offset
	// (ok false when none was saved).
	Claim(ctx context.Context, stream, reader, holder string) (offset int64, ok bool, err error)
	// SaveAs records offset, as Save does, while holder still holds the
	// name; ErrCheckpointTaken when another reader claimed it since.
	SaveAs(ctx context.Context, stream, reader, holder string, offset int64) error
}

// ErrCheckpointTaken is returned by FencedCheckpointStore.SaveAs when
// another reader of the same name claimed the checkpoint since.
var ErrCheckpointTaken = errors.New("acemq: another stream reader with this name took the checkpoint over (the newest reader started holds it); give each reader that must see every message a name of its own, or run one reader per name")

// MemoryCheckpoints is a CheckpointStore in process memory: checkpoints
// survive a reader's restart but not the process. The zero value is ready
// to use; it is safe for concurrent use.
type MemoryCheckpoints struct {
	mu      sync.Mutex
	m       map[[2]string]int64
	holders map[[2]string]string
}

// Load returns the offset saved for stream and reader. It never fails.
func (s *MemoryCheckpoints) Load(_ context.Context, stream, reader string) (int64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, ok := s.m[[2]string{stream, reader}]
	return off, ok, nil
}

// Save records offset for stream and reader unless a newer one is saved.
// It never fails.
func (s *MemoryCheckpoints) Save(_ context.Context, stream, reader string, offset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.save([2]string{stream, reader}, offset)
	return nil
}

func (s *MemoryCheckpoints) save(k [2]string, offset int64) {
	if s.m == nil {
		s.m = map[[2]string]int64{}
	}
	if old, ok := s.m[k]; !ok || offset > old {
		s.m[k] = offset
	}
}

// Claim implements FencedCheckpointStore. It never fails.
func (s *MemoryCheckpoints) Claim(_ context.Context, stream, reader, holder string) (int64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders == nil {
		s.holders = map[[2]string]string{}
	}
	k := [2]string{stream, reader}
	s.holders[k] = holder
	off, ok := s.m[k]
	return off, ok, nil
}

// SaveAs implements FencedCheckpointStore.
func (s *MemoryCheckpoints) SaveAs(_ context.Context, stream, reader, holder string, offset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{stream, reader}
	if h, ok := s.holders[k]; ok && h != holder {
		return ErrCheckpointTaken
	}
	s.save(k, offset)
	return nil
}

// checkpointing is the Checkpoint option's settings.
type checkpointing struct {
	store    CheckpointStore
	every    int
	interval time.Duration
}

// Checkpoint makes the reader load its starting offset from store (the
// offset after the saved one, overriding From when a checkpoint exists)
// and save the newest handled offset after every `every` messages handled,
// every `interval`, and on Close. every ≤ 0 saves by time only; interval
// ≤ 0 by count only; both ≤ 0 only on Close.
//
// One reader per name: with a FencedCheckpointStore (both shipped stores)
// the reader claims its name as it starts, taking it from a reader of the
// same name still running elsewhere; that reader's next save fails, and it
// stops as the Stop policy stops a reader (Err, Health DEGRADED, Close
// return it), having handled at most what it handled since its last save
// twice with the new one. The checkpoint never moves backwards.
//
// A reader killed between saves reads again, after its restart, what it
// handled since the last save: at most `every` messages, or `interval`'s
// worth, plus the message in hand. A failed save is retried at the next
// occasion and counted (CheckpointErr); it never stops the reader.
func Checkpoint(store CheckpointStore, every int, interval time.Duration) Option {
	return func(c *config) {
		c.checkpoint = &checkpointing{store: store, every: every, interval: interval}
	}
}

// saver is the reader's checkpoint goroutine: it saves when the handler
// asks (every N messages) and on a ticker, and stops on Close.
type saver struct {
	r      *Reader
	cp     checkpointing
	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	saved  int64  // newest offset saved; -1 none
	holder string // the reader's claim on its name (FencedCheckpointStore), or ""
	since  int    // messages handled since the last kick
	fails  int
	err    error
}

func newSaver(r *Reader, cp checkpointing, saved int64, holder string) *saver {
	return &saver{r: r, cp: cp, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), saved: saved, holder: holder}
}

func (s *saver) run() {
	defer close(s.done)
	var tick <-chan time.Time
	if s.cp.interval > 0 {
		t := time.NewTicker(s.cp.interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		case <-tick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = s.save(ctx)
		cancel()
	}
}

// handled is called by the handler after each message that advanced the
// reader; every N it wakes the goroutine.
func (s *saver) handled() {
	if s.cp.every <= 0 {
		return
	}
	s.mu.Lock()
	s.since++
	due := s.since >= s.cp.every
	if due {
		s.since = 0
	}
	s.mu.Unlock()
	if due {
		select {
		case s.kick <- struct{}{}:
		default: // a save is already due
		}
	}
}

// save writes the reader's newest handled offset when it moved since the
// last save. Saves run one at a time (the goroutine, then Close).
func (s *saver) save(ctx context.Context) error {
	off, ok := s.r.Handled()
	s.mu.Lock()
	moved := ok && off > s.saved
	s.mu.Unlock()
	if !moved {
		return nil
	}
	var err error
	if f, ok := s.cp.store.(FencedCheckpointStore); ok && s.holder != "" {
		err = f.SaveAs(ctx, s.r.stream, s.r.name, s.holder, off)
	} else {
		err = s.cp.store.Save(ctx, s.r.stream, s.r.name, off)
	}
	if errors.Is(err, ErrCheckpointTaken) {
		s.r.overtaken(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.fails++
		s.err = fmt.Errorf("acemq: stream reader %q on %q cannot save its checkpoint at offset %d: %w; it retries at the next save, and a restart before then reads again from offset %d", s.r.name, s.r.stream, off, err, s.saved+1)
		return s.err
	}
	s.saved, s.err = off, nil
	return nil
}

// close stops the goroutine and makes the final save.
func (s *saver) close(ctx context.Context) error {
	close(s.stop)
	<-s.done
	return s.save(ctx)
}

// Checkpointed returns the newest offset the reader saved to its
// checkpoint store (loaded at start, or saved since); ok is false when
// there is none or the reader has no store.
func (r *Reader) Checkpointed() (offset int64, ok bool) {
	if r.saver == nil {
		return 0, false
	}
	r.saver.mu.Lock()
	defer r.saver.mu.Unlock()
	return r.saver.saved, r.saver.saved >= 0
}

// CheckpointErr returns how many checkpoint saves failed and the error of
// the latest save when it failed (nil once a save succeeds again).
func (r *Reader) CheckpointErr() (failures int, err error) {
	if r.saver == nil {
		return 0, nil
	}
	r.saver.mu.Lock()
	defer r.saver.mu.Unlock()
	return r.saver.fails, r.saver.err
}
