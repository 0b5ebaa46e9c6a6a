package claimcheck

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// FileStore keeps each payload in a file of its own in one directory,
// named by its key. A file appears whole or not at all: Put writes a
// temporary file, syncs it, renames it into place and syncs the
// directory, so a crash never leaves half a payload under a key. Keys are
// checked before any path is built from them: only letters, digits, '-',
// '_' and '.', not starting with '.', at most 255 bytes, so no key can
// name a file outside the directory. Safe for concurrent use, also by
// several processes sharing the directory (a shared file system must
// honour rename and fsync).
type FileStore struct {
	dir string
}

// tempPrefix starts the name of a file still being written; such names
// are never valid keys.
const tempPrefix = ".put-"

// NewFileStore returns a store in dir, creating it (mode 0700) if it does
// not exist. It fails when dir cannot be created or is not a directory.
func NewFileStore(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("acemq: claimcheck.NewFileStore needs a directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("acemq: cannot create the claim-check directory: %w", err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot use the claim-check directory: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("acemq: the claim-check directory %s is not a directory", dir)
	}
	return &FileStore{dir: dir}, nil
}

// checkFileKey refuses a key that could name anything but a file directly
// in the store's directory.
func checkFileKey(key string) error {
	switch {
	case key == "":
		return invalidKey(key, "is empty")
	case len(key) > maxKey:
		return invalidKey(key, fmt.Sprintf("is %d bytes, longer than %d", len(key), maxKey))
	case key[0] == '.':
		return invalidKey(key, "starts with '.'")
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return invalidKey(key, "holds a character other than letters, digits, '-', '_' and '.'")
		}
	}
	return nil
}

// Put writes payload to a new file and returns its key.
func (s *FileStore) Put(ctx context.Context, payload []byte) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	key, err := newKey()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(s.dir, tempPrefix+"*")
	if err != nil {
		return "", fmt.Errorf("acemq: cannot create a claim-check file: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(payload); err != nil {
		return "", fmt.Errorf("acemq: cannot write a claim-check file: %w", err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("acemq: cannot sync a claim-check file to disk: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("acemq: cannot close a claim-check file: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, key)); err != nil {
		return "", fmt.Errorf("acemq: cannot move a claim-check file into place: %w", err)
	}
	ok = true
	if err := syncDir(s.dir); err != nil {
		return "", fmt.Errorf("acemq: the claim-check file is written but its directory could not be synced, so a crash could lose it: %w", err)
	}
	return key, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Get reads the payload under key. A key that fails the check is an error
// wrapping ErrInvalidKey; a missing file is not found.
func (s *FileStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := checkFileKey(key); err != nil {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	b, err := os.ReadFile(filepath.Join(s.dir, key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("acemq: cannot read claim-check file %s: %w", key, err)
	}
	return b, true, nil
}

// Delete removes the file under key; a missing file is not an error.
func (s *FileStore) Delete(ctx context.Context, key string) error {
	if err := checkFileKey(key); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(s.dir, key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("acemq: cannot delete claim-check file %s: %w", key, err)
	}
	return nil
}

// DeleteStoredBefore deletes the payload files (and leftover temporary
// files) last modified before cutoff.
func (s *FileStore) DeleteStoredBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("acemq: cannot list the claim-check directory: %w", err)
	}
	var n int64
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		name := e.Name()
		if !e.Type().IsRegular() || (checkFileKey(name) != nil && !strings.HasPrefix(name, tempPrefix)) {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.ModTime().Before(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("acemq: cannot delete claim-check file %s: %w", name, err)
		}
		if !strings.HasPrefix(name, tempPrefix) {
			n++
		}
	}
	return n, nil
}
