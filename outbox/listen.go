package outbox

import (
	"context"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/acemq-go/acemq/sqlstore"
)

// canListen reports whether the store is PostgreSQL through pgx's stdlib
// driver, the one LISTEN is implemented for.
func canListen(s *Store) bool {
	if s.dialect != sqlstore.PostgreSQL {
		return false
	}
	_, ok := s.db.Driver().(*stdlib.Driver)
	return ok
}

var errNotPgx = errors.New("acemq: the outbox LISTEN wake-up needs pgx's stdlib driver")

// listenLoop keeps one pooled connection LISTENing on NotifyChannel and
// wakes the relay on every notification, reconnecting after a failure.
// Polling carries on meanwhile, so a broken listener only costs latency.
func (r *Relay) listenLoop(ctx context.Context) {
	backoff := time.NewTimer(0)
	defer backoff.Stop()
	<-backoff.C
	for {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil || errors.Is(err, errNotPgx) {
			return
		}
		r.log.Warn("acemq: the outbox relay lost its LISTEN connection; polling continues and it listens again shortly", "relay", r.cfg.id, "error", err)
		backoff.Reset(time.Second)
		select {
		case <-ctx.Done():
			return
		case <-backoff.C:
		}
	}
}

func (r *Relay) listenOnce(ctx context.Context) error {
	c, err := r.store.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var loopErr error
	err = c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			loopErr = errNotPgx
			return nil
		}
		pc := sc.Conn()
		if _, err := pc.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
			loopErr = err
			return driver.ErrBadConn
		}
		r.listenMu.Do(func() { close(r.listening) })
		r.Wake() // anything committed before LISTEN took effect
		for {
			if _, err := pc.WaitForNotification(ctx); err != nil {
				loopErr = err
				// The session is subscribed; never hand it back to the pool.
				return driver.ErrBadConn
			}
			r.Wake()
		}
	})
	if loopErr != nil {
		return loopErr
	}
	return err
}
