package acemq

import (
	"context"
	"errors"
	"log/slog"
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
		if got, ok := formatMaxAge(c.d); got != c.want || ok != c.ok {
			t.Errorf("formatMaxAge(%v) = %q, %v; want %q, %v", c.d, got, ok, c.want, c.ok)
		}
	}
}

func TestStreamRetentionIsDeclaredAndValidated(t *testing.T) {
	top := NewTopology().
		Queue("plain", QueueOptions{Type: Stream}).
		Queue("kept", QueueOptions{Type: Stream, MaxAge: 7 * 24 * time.Hour, MaxBytes: 1 << 30, SegmentBytes: 1 << 20})
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
		Queue("fine", QueueOptions{Type: Stream, MaxAge: 1500 * time.Millisecond}).
		Queue("typo", QueueOptions{Type: Stream, Args: transport.Table{"x-max-age": "7 days"}}).
		Queue("empty", QueueOptions{Type: Stream, MaxBytes: -5, SegmentBytes: -1}).
		Queue("work", QueueOptions{Type: Quorum, MaxAge: time.Hour, SegmentBytes: 10}).
		Queue("temp", QueueOptions{Type: Stream, Exclusive: true})
	var te *TopologyError
	if err := bad.Validate(); !errors.As(err, &te) {
		t.Fatalf("Validate() = %v, want a *TopologyError", err)
	}
	for _, want := range []string{
		`stream "fine" has max age 1.5s; use a positive whole number of seconds`,
		`stream "typo" has x-max-age "7 days"; use QueueOptions.MaxAge, or a positive integer followed by D, h, m or s`,
		`queue "empty" sets x-max-length-bytes to -5; use a positive number of bytes`,
		`queue "empty" sets x-stream-max-segment-size-bytes to -1; use a positive number of bytes`,
		`queue "work" sets x-max-age, but it is a quorum queue: only streams have it. Make it a stream (QueueOptions{Type: Stream}), or drop the setting.`,
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
	c, err := Connect(ctx, "memory://"+name, Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	top := NewTopology().Queue("history", QueueOptions{Type: Stream, MaxAge: 36 * time.Hour, SegmentBytes: 1 << 20})
	for range 2 { // a second Apply is an equivalent re-declare
		if err := c.Apply(ctx, top); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	if _, err := c.QueueInfo(ctx, "history"); err != nil {
		t.Fatalf("QueueInfo: %v", err)
	}
}
