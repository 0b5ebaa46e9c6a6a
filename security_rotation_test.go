package acemq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/security"
)

func randomSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "pw-" + hex.EncodeToString(b)
}

// TestRotationDrillRecoversWithTheRotatedSecretAfterAFailingProvider is
// the credentials drill (behaviour §1.4) with a user of its own: a Conn
// reading a secret file is connected and publishing; the file disappears
// (the provider fails), the user's password is changed on the broker
// (rabbitmqctl change_password) and, since RabbitMQ keeps open connections
// after a password change, the user's connections are closed (rabbitmqctl
// close_all_user_connections). Recovery keeps failing with the provider's
// error, reported on a retrying event, until the file is rewritten with
// the new secret; then the Conn recovers with it, publishing resumes, and
// every confirmed message is in the queue.
func TestRotationDrillRecoversWithTheRotatedSecretAfterAFailingProvider(t *testing.T) {
	user := testenv.Unique("acemq-rotate")
	oldPW, newPW := randomSecret(t), randomSecret(t)
	testenv.BrokerUser(t, user, oldPW)
	file := filepath.Join(t.TempDir(), "rabbitmq-secret")
	if err := os.WriteFile(file, []byte(user+":"+oldPW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := newEventLog()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, withoutUser(t, testenv.AMQPURL(t)), acemq.Config{Logger: slog.New(slog.DiscardHandler), OnEvent: log.add, CredentialsProvider: security.File(file, ""), RecoveryInterval: 100 * time.Millisecond, RecoveryIntervalMax: 500 * time.Millisecond})
	if err != nil {
		t.Fatalf("connecting with the file provider: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	q := classicQueue(t, c, "rotate")

	// Publish all along; count what the broker confirmed.
	var mu sync.Mutex
	confirmed := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p := acemq.NewPublisher[item](c, "", q, acemq.PublisherConfig{})
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			sent, err := p.Send(sctx, item{n})
			scancel()
			if err == nil && sent.Outcome == acemq.OutcomeConfirmed {
				mu.Lock()
				confirmed++
				mu.Unlock()
				continue
			}
			// Refused while recovering: pace the retries.
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	waitConfirmed := func(atLeast int, why string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			n := confirmed
			mu.Unlock()
			if n >= atLeast {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d confirmed, want at least %d; events %v", why, n, atLeast, log.kinds())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitConfirmed(5, "before the rotation")

	if err := os.Remove(file); err != nil { // the provider now fails
		t.Fatal(err)
	}
	testenv.RabbitCtl(t, "change_password", user, newPW)
	from := log.mark()
	testenv.RabbitCtl(t, "close_all_user_connections", user, "acemq test: password rotated")
	log.wait(t, acemq.EventLost, from, 15*time.Second)
	// A retrying event carries the previous attempt's failure: the
	// provider's, naming the file and never a secret.
	e, at := log.waitFor(t, func(e acemq.Event) bool { return e.Kind == acemq.EventRetrying && e.Err != nil }, from, 15*time.Second)
	from = at + 1
	msg := e.Err.Error()
	if !strings.Contains(msg, "cannot read the credentials file "+file) {
		t.Fatalf("retrying event error %q does not name the unreadable file", msg)
	}
	if strings.Contains(msg, oldPW) || strings.Contains(msg, newPW) {
		t.Fatalf("retrying event error shows a secret: %q", msg)
	}
	if c.State() == acemq.StateOpen {
		t.Fatal("the Conn is open although its provider fails")
	}
	mu.Lock()
	before := confirmed
	mu.Unlock()
	if err := os.WriteFile(file, []byte(user+":"+newPW+"\n\t \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log.wait(t, acemq.EventRecovered, from, 20*time.Second)
	waitConfirmed(before+5, "after the rotation")
	close(stop)
	wg.Wait()
	stop = make(chan struct{})

	info, err := c.QueueInfo(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if info.Messages < confirmed {
		t.Fatalf("the queue holds %d messages but %d were confirmed: a confirmed message was lost", info.Messages, confirmed)
	}
	t.Logf("%d confirmed, %d in the queue, %d before the rotation", confirmed, info.Messages, before)
}

// waitFor returns the first event at index >= from that ok accepts, and
// its index, failing the test if none arrives within timeout.
func (l *eventLog) waitFor(t *testing.T, ok func(acemq.Event) bool, from int, timeout time.Duration) (acemq.Event, int) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		for i := from; i < len(l.list); i++ {
			if ok(l.list[i]) {
				e := l.list[i]
				l.mu.Unlock()
				return e, i
			}
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("no matching event within %s; events: %v", timeout, l.kinds())
		}
	}
}
