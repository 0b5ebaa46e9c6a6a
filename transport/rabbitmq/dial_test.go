package rabbitmq

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

// deadAddress returns a loopback address nothing listens on.
func deadAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func liveAddress(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(testenv.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func TestDialSkipsDeadAddressAndReportsIndexOfLiveOne(t *testing.T) {
	cfg := transport.Config{URL: testenv.AMQPURL(t), Addresses: []string{deadAddress(t), liveAddress(t)}}
	c, idx, err := Driver{}.Dial(context.Background(), cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	if idx != 1 {
		t.Fatalf("index %d, want 1", idx)
	}
}

func TestDialFailureNamesEveryAddressAndHidesPassword(t *testing.T) {
	a, b := deadAddress(t), deadAddress(t)
	cfg := transport.Config{URL: "amqp://app:s3cret-pw@" + a + "/", Addresses: []string{a, b}}
	_, _, err := Driver{}.Dial(context.Background(), cfg)
	if err == nil {
		t.Fatal("dial to dead addresses succeeded")
	}
	msg := err.Error()
	if strings.Contains(msg, "s3cret-pw") {
		t.Fatalf("error shows the password: %s", msg)
	}
	for _, want := range []string{"amqp://app:***@" + a, "amqp://app:***@" + b} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error %q does not name %s", msg, want)
		}
	}
}

func TestCredentialsProviderIsAskedOnEveryDialAndBeatsURLUserinfo(t *testing.T) {
	u, err := url.Parse(testenv.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	user := u.User.Username()
	pass, _ := u.User.Password()
	u.User = url.UserPassword("nobody", "wrong")
	var calls atomic.Int32
	cfg := transport.Config{URL: u.String(), Credentials: func(context.Context) (string, string, error) {
		calls.Add(1)
		return user, pass, nil
	}}
	for i := 0; i < 2; i++ {
		c, _, err := Driver{}.Dial(context.Background(), cfg)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		_ = c.Close()
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("provider asked %d times over 2 dials, want 2", n)
	}
}

func TestConnectionNameIsVisibleToTheBroker(t *testing.T) {
	name := testenv.Unique("rabbit-named")
	c := dial(t, transport.Config{ConnectionName: name, Product: "AceMQ for Go", Version: "test"})
	_ = connectionPid(t, name) // fails the test when the broker does not list it
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if c.Err() != nil {
		t.Fatalf("Err after Close = %v, want nil", c.Err())
	}
}

func TestCapabilitiesAreSortedContractNames(t *testing.T) {
	got := Driver{}.Capabilities()
	for i := 1; i < len(got); i++ {
		if got[i-1] >= got[i] {
			t.Fatalf("not sorted: %v", got)
		}
	}
	if d, ok := transport.Lookup("amqps"); !ok || d.Name() != "rabbitmq" {
		t.Fatalf("amqps not registered to rabbitmq")
	}
}

func TestDialGivesUpOnASilentServerAtTheConnectTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c // hold it open and say nothing
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		for c := range accepted {
			_ = c.Close()
		}
	})
	cfg := transport.Config{URL: "amqp://guest:guest@" + l.Addr().String() + "/", ConnectTimeout: 200 * time.Millisecond}
	start := time.Now()
	_, _, err = Driver{}.Dial(context.Background(), cfg)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("dial took %s with a 200ms connect timeout", took)
	}
}

func TestDialStopsWhenTheContextIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := Driver{}.Dial(ctx, transport.Config{URL: testenv.AMQPURL(t)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
