package memory

import (
	"context"
	"slices"
	"testing"

	"github.com/acemq-go/acemq/transport"
)

func TestDriverIsRegisteredForMemoryScheme(t *testing.T) {
	d, ok := transport.Lookup("memory")
	if !ok {
		t.Fatal("memory scheme not registered")
	}
	if d.Name() != "memory" {
		t.Fatalf("Name() = %q", d.Name())
	}
	caps := d.Capabilities()
	if !slices.IsSorted(caps) || !slices.Contains(caps, "PUBLISHER_CONFIRMS") || !slices.Contains(caps, "DEAD_LETTER_NATIVE") {
		t.Fatalf("capabilities %v: want sorted, with confirms and native dead-lettering", caps)
	}
}

func TestDialRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"amqp://x", "memory://", "memory://x?bogus=1", "::"} {
		if _, _, err := (Driver{}).Dial(context.Background(), transport.Config{URL: u}); err == nil {
			t.Errorf("Dial(%q) succeeded", u)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := (Driver{}).Dial(ctx, transport.Config{URL: "memory://x"}); err == nil {
		t.Error("Dial with a done context succeeded")
	}
}

func TestSameNameReachesSameBrokerUntilDelete(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name+"?confirms=off", nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	if Lookup(name) != b || b.Connections() != 1 {
		t.Fatalf("Lookup returned another broker or %d connections", b.Connections())
	}
	if _, ok := b.QueueInfo("q"); !ok {
		t.Fatal("queue declared through the URL is not on the named broker")
	}
	Delete(name)
	waitDone(t, c.Done())
	wantCode(t, c.Err(), transport.CodeConnectionForced, "")
	if _, ok := Lookup(name).QueueInfo("q"); ok {
		t.Fatal("a deleted broker's queue survived")
	}
}
