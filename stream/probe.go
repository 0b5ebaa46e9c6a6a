package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
)

// How long a probe waits: for the first delivery of a stream that may be
// empty, and for the rest of a chunk once one came.
const (
	probeEmptyWait = 300 * time.Millisecond
	probeQuietWait = 50 * time.Millisecond
)

// Bounds are the oldest and newest offsets a stream holds, as a probe saw
// them.
type Bounds struct {
	// First is the oldest retained offset, Last the newest; both are -1
	// when the stream is empty.
	First, Last int64
}

// Empty reports whether the stream held no message.
func (b Bounds) Empty() bool { return b.Last < 0 }

// Messages is about how many messages the stream holds, Last − First + 1
// (RabbitMQ's offsets count every message, so this is exact unless
// retention cut between the two probes).
func (b Bounds) Messages() int64 {
	if b.Empty() || b.First < 0 {
		return 0
	}
	return b.Last - b.First + 1
}

// Probe reads the oldest and newest offsets of stream over AMQP 0-9-1
// (AMQP cannot ask for them, and RabbitMQ reports a stream's message count
// as 0): two short-lived consumers on a channel of their own, one attached
// at "first" that takes one message, one at "last" that reads the newest
// chunk (every message of it, until 50 ms pass with nothing more). It
// changes nothing on the stream. It takes about 300 ms when the stream is
// empty, about 50 ms otherwise. It fails when stream is missing or is not a
// stream. Safe for concurrent use.
func Probe(ctx context.Context, c *acemq.Conn, stream string) (Bounds, error) {
	first, _, err := probe(ctx, c, stream, "first", false)
	if err != nil || first < 0 {
		return Bounds{First: -1, Last: -1}, err
	}
	_, last, err := probe(ctx, c, stream, "last", true)
	if err != nil {
		return Bounds{First: -1, Last: -1}, err
	}
	return Bounds{First: first, Last: last}, nil
}

// probe attaches a consumer at start and returns the first and the
// largest offset it received (-1 when none): only the first when all is
// false, else every delivery until the stream goes quiet.
func probe(ctx context.Context, c *acemq.Conn, stream string, start any, all bool) (first, last int64, err error) {
	first, last = -1, -1
	ch, err := c.Channel(ctx)
	if err != nil {
		return first, last, fmt.Errorf("acemq: cannot open a channel to probe stream %q: %w", stream, err)
	}
	defer ch.Close()
	if err := ch.Qos(100); err != nil {
		return first, last, fmt.Errorf("acemq: cannot set the prefetch to probe stream %q: %w", stream, err)
	}
	deliveries, err := ch.Consume(ctx, transport.ConsumeSpec{
		Queue: stream,
		Tag:   "acemq-stream-probe-" + acemq.NewEnvelope().ID,
		Args:  transport.Table{"x-stream-offset": start},
	})
	if err != nil {
		return first, last, fmt.Errorf("acemq: cannot probe stream %q (%w); check that it exists and is a stream", stream, err)
	}
	wait := time.NewTimer(probeEmptyWait)
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return first, last, ctx.Err()
		case <-wait.C:
			return first, last, nil
		case d, ok := <-deliveries:
			if !ok {
				return first, last, fmt.Errorf("acemq: the broker ended the probe of stream %q: %v", stream, ch.Err())
			}
			off, isStream := offsetHeader(d.Headers)
			if !isStream {
				// Not acknowledged: closing the channel puts it back.
				return -1, -1, errNotStream(stream)
			}
			// An ack on a stream only returns credit.
			_ = ch.Ack(d.DeliveryTag)
			if first < 0 {
				first = off
			}
			last = max(last, off)
			if !all {
				return first, last, nil
			}
			if !wait.Stop() {
				select {
				case <-wait.C:
				default:
				}
			}
			wait.Reset(probeQuietWait)
		}
	}
}

func errNotStream(stream string) error {
	return fmt.Errorf("acemq: %q is not a stream: its messages carry no x-stream-offset; declare it with acemq.QueueOptions{Type: acemq.Stream}", stream)
}

func offsetHeader(h map[string]any) (int64, bool) {
	switch n := h["x-stream-offset"].(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	}
	return 0, false
}
