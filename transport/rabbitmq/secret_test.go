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
