package claimcheck

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acemq-go/acemq/claimcheck/internal/dbtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("database/sql.(*DB).connectionOpener"))
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// storeCase opens a store whose idea of "stored at" follows now where the
// store keeps its own time (the file store uses the file's modification
// time, so its case moves files' times instead).
type storeCase struct {
	name string
	open func(t *testing.T, c *clock) Store
}

var stores = func() []storeCase {
	out := []storeCase{
		{"memory", func(t *testing.T, c *clock) Store { s := NewMemoryStore(); s.now = c.now; return s }},
		{"file", func(t *testing.T, c *clock) Store {
			s, err := NewFileStore(filepath.Join(t.TempDir(), "claims"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	}
	for _, b := range dbtest.Dialects {
		out = append(out, storeCase{b.Name, func(t *testing.T, c *clock) Store {
			db, d := b.Open(t)
			s, err := NewSQLStore(db, d)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.EnsureSchema(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := s.EnsureSchema(context.Background()); err != nil {
				t.Fatalf("EnsureSchema is not idempotent: %v", err)
			}
			s.now = c.now
			return s
		}})
	}
	return out
}()

func forEachStore(t *testing.T, f func(t *testing.T, s Store, c *clock)) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			c := &clock{t: time.Now()}
			f(t, sc.open(t, c), c)
		})
	}
}

func TestStoresKeepPayloadsByteForByteUnderFreshKeys(t *testing.T) {
	ctx := context.Background()
	big := bytes.Repeat([]byte{0, 1, 2, 0xff, 'x'}, (1<<20)/5+1) // just over 1 MiB, binary
	forEachStore(t, func(t *testing.T, s Store, _ *clock) {
		k1, err := s.Put(ctx, big)
		if err != nil {
			t.Fatal(err)
		}
		k2, err := s.Put(ctx, []byte{})
		if err != nil {
			t.Fatal(err)
		}
		if k1 == k2 || k1 == "" || len(k1) > maxKey {
			t.Fatalf("keys %q, %q", k1, k2)
		}
		got, found, err := s.Get(ctx, k1)
		if err != nil || !found || !bytes.Equal(got, big) {
			t.Fatalf("Get big: found %v, %d bytes, %v", found, len(got), err)
		}
		if got, found, err := s.Get(ctx, k2); err != nil || !found || len(got) != 0 {
			t.Fatalf("Get empty: %v %v %v", got, found, err)
		}
		if _, found, err := s.Get(ctx, "0123456789abcdef0123456789abcdef"); err != nil || found {
			t.Fatalf("Get of a key never put: found %v, %v", found, err)
		}
		if err := s.Delete(ctx, k1); err != nil {
			t.Fatal(err)
		}
		if _, found, err := s.Get(ctx, k1); err != nil || found {
			t.Fatalf("Get after Delete: found %v, %v", found, err)
		}
		if err := s.Delete(ctx, k1); err != nil {
			t.Fatalf("deleting twice: %v", err)
		}
	})
}

func TestPruneDeletesOnlyPayloadsOlderThanRetention(t *testing.T) {
	ctx := context.Background()
	forEachStore(t, func(t *testing.T, s Store, c *clock) {
		old, err := s.Put(ctx, []byte("old"))
		if err != nil {
			t.Fatal(err)
		}
		if fs, ok := s.(*FileStore); ok {
			past := time.Now().Add(-2 * time.Hour)
			if err := os.Chtimes(filepath.Join(fs.dir, old), past, past); err != nil {
				t.Fatal(err)
			}
		} else {
			c.advance(2 * time.Hour)
		}
		fresh, err := s.Put(ctx, []byte("fresh"))
		if err != nil {
			t.Fatal(err)
		}
		p := s.(Pruner)
		if _, err := Prune(ctx, p, 0); err == nil {
			t.Fatal("a zero retention was accepted")
		}
		// Prune compares with the real clock; the SQL and memory stores'
		// times are the test clock's, so delete by cutoff for them.
		var n int64
		if _, ok := s.(*FileStore); ok {
			n, err = Prune(ctx, p, time.Hour)
		} else {
			n, err = p.DeleteStoredBefore(ctx, c.now().Add(-time.Hour))
		}
		if err != nil || n != 1 {
			t.Fatalf("pruned %d, %v; want 1", n, err)
		}
		if _, found, _ := s.Get(ctx, old); found {
			t.Fatal("the old payload survived")
		}
		if _, found, _ := s.Get(ctx, fresh); !found {
			t.Fatal("the fresh payload was pruned")
		}
	})
}

func TestFileStoreRefusesKeysThatCouldLeaveItsDirectory(t *testing.T) {
	root := t.TempDir()
	s, err := NewFileStore(filepath.Join(root, "claims"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "secret"), []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, key := range []string{"../secret", "..", ".", "a/b", `a\b`, "/etc/passwd", ".put-123", "", "é", "a\x00b", strings.Repeat("a", 256)} {
		if _, _, err := s.Get(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "secret")); err != nil {
		t.Fatal("a traversal key deleted a file outside the store")
	}
	// Keys other libraries write (UUIDs, dotted names) are fine.
	for _, key := range []string{"3f2504e0-4f89-11d3-9a0c-0305e82c3301", "orders.2026_01", strings.Repeat("a", 255)} {
		if _, found, err := s.Get(ctx, key); err != nil || found {
			t.Errorf("Get(%q) = %v, %v", key, found, err)
		}
	}
}

func TestFileStorePutLeavesOneWholePrivateFileAndNoTemporaries(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "claims")
	s, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, err := s.Put(context.Background(), []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != key {
		t.Fatalf("directory holds %v, want just %s", entries, key)
	}
	info, _ := entries[0].Info()
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", info.Mode().Perm())
	}
	if _, err := NewFileStore(filepath.Join(dir, key)); err == nil {
		t.Fatal("a file was accepted as the store's directory")
	}
}
