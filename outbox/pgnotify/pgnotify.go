// Package pgnotify wakes an outbox relay on PostgreSQL as soon as a
// transaction that called outbox.Store.Add commits: Add issues pg_notify
// on outbox.NotifyChannel, and a Listener LISTENs on it.
//
//	relay, err := outbox.NewRelay(conn, store, outbox.WithNotifier(pgnotify.New(db)))
//
// It is a package of its own so that only programs that use it link pgx:
// the outbox itself works on any database/sql driver.
//
// The manual's page on the outbox: https://github.com/acemq-go/acemq/blob/main/docs/outbox.md
package pgnotify

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/acemq-go/acemq/outbox"
)

// Listener LISTENs on outbox.NotifyChannel through one connection of a
// *sql.DB opened with pgx's stdlib driver ("pgx"). It is an
// outbox.Notifier; one Listener may serve one relay at a time.
type Listener struct {
	db *sql.DB
}

var _ outbox.Notifier = (*Listener)(nil)

// New returns a Listener on db. It does not touch the database.
func New(db *sql.DB) *Listener { return &Listener{db: db} }

// ErrNotPgx is returned by Listen when the database's driver is not pgx's
// stdlib driver, the only one LISTEN is implemented for.
// It wraps errors.ErrUnsupported, so a relay stops trying and polls.
var ErrNotPgx = fmt.Errorf("acemq: the outbox NOTIFY wake-up needs a *sql.DB opened with pgx's stdlib driver (\"pgx\"); without it the relay polls: %w", errors.ErrUnsupported)

// Listen takes one connection from the pool, LISTENs on
// outbox.NotifyChannel, calls wake once subscribed and on every
// notification, and returns when ctx ends or the connection fails. The
// subscribed connection is closed, never handed back to the pool.
func (l *Listener) Listen(ctx context.Context, wake func()) error {
	if l.db == nil {
		return errors.New("acemq: pgnotify.New was given a nil *sql.DB")
	}
	if _, ok := l.db.Driver().(*stdlib.Driver); !ok {
		return ErrNotPgx
	}
	c, err := l.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("acemq: cannot take a connection to LISTEN on: %w", err)
	}
	defer c.Close()
	var loopErr error
	err = c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			loopErr = ErrNotPgx
			return nil
		}
		pc := sc.Conn()
		if _, err := pc.Exec(ctx, "LISTEN "+outbox.NotifyChannel); err != nil {
			loopErr = fmt.Errorf("acemq: cannot LISTEN on %s: %w", outbox.NotifyChannel, err)
			return driver.ErrBadConn
		}
		wake() // anything committed before LISTEN took effect
		for {
			if _, err := pc.WaitForNotification(ctx); err != nil {
				loopErr = err
				// The session is subscribed; never hand it back to the pool.
				return driver.ErrBadConn
			}
			wake()
		}
	})
	if loopErr != nil {
		return loopErr
	}
	return err
}
