package acemq

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/memory"
)

func TestFormatMaxAgeUsesTheLargestWholeUnit(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
		ok   bool
	}{
		{7 * 24 * time.Hour, "7D", true},
		{36 * time.Hour, "36h", true},
		{48 * time.Hour, "2D", true},
		{90 * time.Minute, "90m", true},
		{90 * time.Second, "90s", true},
		{time.Second, "1s", true},
		{1500 * time.Millisecond, "", false},
		{0, "", false},
		{-time.Hour, "", false},
	} {
		if got, ok := FormatMaxAge(c.d); got != c.want || ok != c.ok {
			t.Errorf("FormatMaxAge(%v) = %q, %v; want %q, %v", c.d, got, ok, c.want, c.ok)
		}
	}
}

func TestStreamRetentionIsDeclaredAndValidated(t *testing.T) {
	top := NewTopology().
		Queue("plain", AsStream()).
		Queue("kept", AsStream(), StreamMaxAge(7*24*time.Hour), StreamMaxBytes(1<<30), StreamSegmentBytes(1<<20))
	if err := top.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if got := findQueue(t, top, "plain").Queue.Args; !reflect.DeepEqual(got, transport.Table{"x-queue-type": "stream"}) {
		t.Fatalf("plain stream args %v: no retention or segment size may be invented", got)
	}
	d := findQueue(t, top, "kept").Queue
	want := transport.Table{"x-queue-type": "stream", "x-max-age": "7D", "x-max-length-bytes": int64(1 << 30), "x-stream-max-segment-size-bytes": int64(1 << 20)}
	if !reflect.DeepEqual(d.Args, want) || !d.Durable || d.Exclusive || d.AutoDelete {
		t.Fatalf("kept stream: %+v, want durable with %v", d, want)
	}

	bad := NewTopology().
		Queue("fine", AsStream(), StreamMaxAge(1500*time.Millisecond)).
		Queue("typo", AsStream(), WithArgs(transport.Table{"x-max-age": "7 days"})).
		Queue("empty", AsStream(), StreamMaxBytes(0), StreamSegmentBytes(-1)).
		Queue("work", AsQuorum(), StreamMaxAge(time.Hour), StreamSegmentBytes(10)).
		Queue("temp", AsStream(), Exclusive())
	var te *TopologyError
	if err := bad.Validate(); !errors.As(err, &te) {
		t.Fatalf("Validate() = %v, want a *TopologyError", err)
	}
	for _, want := range []string{
		`stream "fine" has max age 1.5s; use a positive whole number of seconds`,
		`stream "typo" has x-max-age "7 days"; use StreamMaxAge, or a positive integer followed by D, h, m or s`,
		`queue "empty" sets x-max-length-bytes to 0; use a positive number of bytes`,
		`queue "empty" sets x-stream-max-segment-size-bytes to -1; use a positive number of bytes`,
		`queue "work" sets x-max-age, but it is a quorum queue: only streams have it. Add AsStream(), or drop the option.`,
		`queue "work" sets x-stream-max-segment-size-bytes, but it is a quorum queue`,
		`queue "temp" cannot be a stream queue while it is exclusive`,
	} {
		found := false
		for _, p := range te.Problems {
			found = found || strings.HasPrefix(p, want)
		}
		if !found {
			t.Errorf("no problem starting %q in:\n%s", want, strings.Join(te.Problems, "\n"))
		}
	}
}

func TestStreamTopologyAppliesOnMemory(t *testing.T) {
	ctx := context.Background()
	const name = "topology-stream"
	t.Cleanup(func() { memory.Delete(name) })
	c, err := Connect(ctx, "memory://"+name, WithLogger(DiscardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	top := NewTopology().Queue("history", AsStream(), StreamMaxAge(36*time.Hour), StreamSegmentBytes(1<<20))
	for range 2 { // a second Apply is an equivalent re-declare
		if err := c.Apply(ctx, top); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	if _, err := c.QueueInfo(ctx, "history"); err != nil {
		t.Fatalf("QueueInfo: %v", err)
	}
}
