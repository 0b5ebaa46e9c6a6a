package rabbitmq

import "context"

// writeLock serialises writers as a sync.Mutex would, except that a writer
// waiting for it gives up when its context ends: a write blocked on a
// socket the broker stopped reading must not hold every other caller past
// its deadline. The zero value is not usable; make one with newWriteLock.
type writeLock chan struct{}

func newWriteLock() writeLock { return make(writeLock, 1) }

// lock takes the lock, or returns ctx's error once ctx ends first.
func (l writeLock) lock(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	default:
	}
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tryLock takes the lock if it is free, and reports whether it did.
func (l writeLock) tryLock() bool {
	select {
	case l <- struct{}{}:
		return true
	default:
		return false
	}
}

// unlock releases the lock; the caller holds it.
func (l writeLock) unlock() { <-l }
