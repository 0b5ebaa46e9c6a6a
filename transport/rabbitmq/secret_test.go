package rabbitmq

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/security"
	"github.com/acemq-go/acemq/transport"
)

// expiringGuest answers guest's password with an expiry life from now, and
// counts the asks; after failAfter asks (when > 0) it fails.
type expiringGuest struct {
	life      time.Duration
	asks      atomic.Int32
	failAfter int32
}

func (p *expiringGuest) Credentials(context.Context) (security.Credentials, error) {
	n := p.asks.Add(1)
	if p.failAfter > 0 && n > p.failAfter {
		return security.Credentials{}, errors.New("token service unavailable")
	}
	return security.Credentials{User: "guest", Password: "guest", ExpiresAt: time.Now().Add(p.life)}, nil
}

func withoutUserInfo(raw string) string {
	scheme, rest, _ := strings.Cut(raw, "://")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	return scheme + "://" + rest
}

func TestExpiringSecretIsRefreshedOnTheOpenConnection(t *testing.T) {
	p := &expiringGuest{life: 400 * time.Millisecond}
	c := dial(t, transport.Config{URL: withoutUserInfo(testenv.AMQPURL(t)), Security: &security.Settings{Provider: p}})
	// Refreshed at three quarters of each life: poll until the provider
	// was asked three more times, the connection staying open throughout.
	deadline := time.Now().Add(wait)
	for p.asks.Load() < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the provider was asked %d times in %s; the secret was not refreshed before it expired", p.asks.Load(), wait)
		}
		select {
		case <-c.Done():
			t.Fatalf("the connection ended while refreshing its secret: %v", c.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	ch := openChannel(t, c) // still usable after update-secret
	if _, err := ch.DeclareQueue(context.Background(), transport.QueueSpec{Name: testenv.Unique("secret"), Exclusive: true}); err != nil {
		t.Fatalf("the connection does not work after update-secret: %v", err)
	}
}

func TestFailedRefreshClosesTheConnectionWithTheCause(t *testing.T) {
	p := &expiringGuest{life: 300 * time.Millisecond, failAfter: 1}
	c := dial(t, transport.Config{URL: withoutUserInfo(testenv.AMQPURL(t)), Security: &security.Settings{Provider: p}})
	select {
	case <-c.Done():
	case <-time.After(wait):
		t.Fatal("the connection stayed open although its secret could not be refreshed")
	}
	err := c.Err()
	if err == nil || !strings.Contains(err.Error(), "could not be refreshed") || !strings.Contains(err.Error(), "token service unavailable") {
		t.Fatalf("Err() = %v, want the refresh failure with the provider's cause", err)
	}
	if strings.Contains(err.Error(), "guest:guest") {
		t.Fatalf("Err() shows the password: %v", err)
	}
}

// rotatingProvider answers each ask with the next login in logins (the
// last one for ever), each expiring life from now, and counts the asks.
type rotatingProvider struct {
	life   time.Duration
	logins [][2]string
	asks   atomic.Int32
}

func (p *rotatingProvider) Credentials(context.Context) (security.Credentials, error) {
	n := int(p.asks.Add(1)) - 1
	l := p.logins[min(n, len(p.logins)-1)]
	return security.Credentials{User: l[0], Password: l[1], ExpiresAt: time.Now().Add(p.life)}, nil
}

func waitAsks(t *testing.T, c transport.Connection, asks func() int32, n int32) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for asks() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the provider was asked %d times in %s, want %d", asks(), wait, n)
		}
		select {
		case <-c.Done():
			t.Fatalf("the connection ended: %v", c.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// A part of the connection dialled after a refresh logs in with the
// refreshed secret, read under the lock the refresh writes it under (the
// race detector reported the two once).
func TestAPartDialledAfterARefreshUsesTheRefreshedLogin(t *testing.T) {
	// Secrets refreshed every 6ms, so that refreshes run while the
	// second part dials (under -race the overlap is what was reported).
	for range 10 {
		p := &rotatingProvider{life: 8 * time.Millisecond, logins: [][2]string{{"guest", "guest"}}}
		c := dial(t, transport.Config{URL: withoutUserInfo(withFrames(t, testenv.AMQPURL(t), "native")), Purpose: transport.Publishing, Security: &security.Settings{Provider: p}})
		waitAsks(t, c, func() int32 { return p.asks.Load() }, 2)
		ch := openChannel(t, c) // the amqp091-go part, dialled now
		if _, err := ch.DeclareQueue(context.Background(), transport.QueueSpec{Name: testenv.Unique("secret-later"), Exclusive: true}); err != nil {
			t.Fatalf("the part dialled after a refresh does not work: %v", err)
		}
		_ = c.Close()
	}
}

// A provider that changes the user name as well: update-secret cannot
// change an open connection's user (the broker would check the new
// password against the old name), so the connection is closed, saying so,
// to be remade with the new login, never sending one user's password
// under another's name.
func TestAProviderThatChangesTheUserNameHasTheConnectionRemade(t *testing.T) {
	testenv.BrokerUser(t, "acemq-rotated", "rotated-secret")
	p := &rotatingProvider{life: 300 * time.Millisecond, logins: [][2]string{{"guest", "guest"}, {"acemq-rotated", "rotated-secret"}}}
	c := dial(t, transport.Config{URL: withoutUserInfo(testenv.AMQPURL(t)), Security: &security.Settings{Provider: p}})
	select {
	case <-c.Done():
	case <-time.After(wait):
		t.Fatal("the connection stayed open with a login the provider no longer gives")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), `changed the user name from "guest" to "acemq-rotated"`) {
		t.Fatalf("Err() = %v; want it to say the user name changed", err)
	}
	// The login the provider gives now works: the new connection is the
	// rotated user's.
	c2 := dial(t, transport.Config{URL: withoutUserInfo(testenv.AMQPURL(t)), Security: &security.Settings{Provider: p}})
	if _, err := openChannel(t, c2).DeclareQueue(context.Background(), transport.QueueSpec{Name: testenv.Unique("secret-rotated"), Exclusive: true}); err != nil {
		t.Fatalf("the rotated login does not work: %v", err)
	}
}
