package rabbitmq

import (
	"context"
	"fmt"
	"time"

	"github.com/acemq-go/acemq/security"
)

// refreshTimeout bounds one ask of the provider plus the update-secret
// round trip.
const refreshTimeout = 10 * time.Second

// refreshLead is the share of a secret's remaining life spent before it is
// refreshed: a secret valid for 4 minutes is refreshed after 3.
const refreshLead = 4

// refreshSecret keeps the connection's secret fresh: before expires it asks
// p again and hands the new password to the broker on the open connection
// (AMQP connection.update-secret), as long as the answers carry an expiry.
// When the provider fails or the broker refuses the new secret, it records
// why and closes the connection, so the owner's recovery dials again with
// a fresh answer instead of waiting for the broker to cut it off. The
// goroutine belongs to the connection: it ends with it, and Close waits
// for it.
func (c *connection) refreshSecret(p security.Provider, expires time.Time) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for !expires.IsZero() {
			wait := time.Until(expires) * (refreshLead - 1) / refreshLead
			t := time.NewTimer(max(wait, 0))
			select {
			case <-c.done:
				t.Stop()
				return
			case <-t.C:
			}
			next, err := c.updateSecret(p)
			if err != nil {
				c.mu.Lock()
				if c.err == nil {
					c.err = fmt.Errorf("rabbitmq: the connection's secret expires at %s and could not be refreshed, so the connection was closed to be remade with fresh credentials: %w", expires.UTC().Format(time.RFC3339), err)
				}
				c.mu.Unlock()
				c.closeParts(closeHandshake)
				return
			}
			expires = next
		}
	}()
}

func (c *connection) updateSecret(p security.Provider) (time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
	defer cancel()
	type answer struct {
		creds security.Credentials
		err   error
	}
	got := make(chan answer, 1)
	go func() {
		cr, err := p.Credentials(ctx)
		got <- answer{cr, err}
	}()
	var a answer
	select {
	case a = <-got:
	case <-c.done:
		cancel()
		<-got
		return time.Time{}, nil
	}
	if a.err != nil {
		return time.Time{}, fmt.Errorf("the credentials provider failed: %w", a.err)
	}
	const reason = "acemq: refreshing an expiring secret"
	if was := c.plan.loginURI().Username; a.creds.User != was {
		// update-secret keeps the connection's user; the broker would
		// check the new password against the old name.
		return time.Time{}, fmt.Errorf("the credentials provider changed the user name from %q to %q, and an open connection cannot change its user (update-secret carries only the secret)", was, a.creds.User)
	}
	c.plan.setLogin(a.creds.User, a.creds.Password) // for a part dialled later
	c.mu.Lock()
	ac, oc := c.ac, c.own
	c.mu.Unlock()
	if ac != nil {
		if err := ac.UpdateSecret(a.creds.Password, reason); err != nil {
			return time.Time{}, fmt.Errorf("the broker refused the new secret: %w", convertError(err))
		}
	}
	if oc != nil {
		if err := oc.updateSecret(ctx, a.creds.Password, reason); err != nil {
			return time.Time{}, fmt.Errorf("the broker refused the new secret: %w", err)
		}
	}
	return a.creds.ExpiresAt, nil
}

// closeParts closes every part of the connection, each within d, keeping
// the reason already recorded: the watchers then end the connection.
func (c *connection) closeParts(d time.Duration) {
	c.mu.Lock()
	ac, acW, oc := c.ac, c.acW, c.own
	c.mu.Unlock()
	deadline := time.Now().Add(d)
	if oc != nil {
		_ = oc.closeWithin(d)
	}
	if ac != nil {
		_ = closeAMQP(ac, acW, deadline)
	}
}
