package memory

import (
	"strconv"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// Streams (x-queue-type=stream) are retained logs: a message gets the next
// offset when it arrives and stays until retention removes the segment
// holding it. Each consumer reads from its own position; settling a
// delivery only returns credit, so nothing is ever removed by a reader.
//
// The model follows RabbitMQ's (osiris) closely enough that stream code
// behaves the same on both brokers, and no kinder:
//   - the log is cut into segments of x-stream-max-segment-size-bytes
//     (500 000 000 when unset, as in RabbitMQ); a message is counted as its
//     body plus streamRecordOverhead bytes;
//   - retention (x-max-age, x-max-length-bytes) is evaluated when a segment
//     fills and a new one starts, and only ever removes whole segments,
//     never the one being written;
//   - each publish is one chunk, so attaching by timestamp starts at the
//     first message stored at or after that second;
//   - a consumer must have a prefetch (basic.qos), and its start is the
//     x-stream-offset consume argument: "first", "last", "next" (default),
//     an integer offset or an AMQP timestamp (whole seconds);
//   - each delivery carries its offset in the x-stream-offset header (int64);
//   - basic.get is refused with 540 NOT_IMPLEMENTED, a connection error.

// defaultSegmentBytes is RabbitMQ's default x-stream-max-segment-size-bytes.
const defaultSegmentBytes = 500_000_000

// streamRecordOverhead approximates what RabbitMQ stores beside a body (the
// chunk and record headers and the encoded AMQP properties), so byte
// retention and segment sizes come out close to the real broker's.
const streamRecordOverhead = 64

// streamEntry is one retained message.
type streamEntry struct {
	m  *message
	ts int64 // wall clock, unix nanoseconds
}

// segment is a run of consecutive offsets.
type segment struct {
	first  int64 // offset of its first message
	bytes  int64
	lastTS int64 // timestamp of its newest message
}

// streamLog is a stream queue's retained messages; the queue's mutex
// guards it.
type streamLog struct {
	maxAge   int64 // nanoseconds; 0 means none
	maxBytes int64 // 0 means none
	segSize  int64

	first    int64 // offset of entries[0]
	entries  []streamEntry
	segments []segment // oldest first; the last is being written
}

func newStreamLog(args transport.Table) *streamLog {
	s := &streamLog{segSize: defaultSegmentBytes}
	if v, ok := args["x-max-age"].(string); ok {
		s.maxAge, _ = parseMaxAge(v)
	}
	if v, ok := toInt64(args["x-max-length-bytes"]); ok {
		s.maxBytes = v
	}
	if v, ok := toInt64(args["x-stream-max-segment-size-bytes"]); ok && v > 0 {
		s.segSize = v
	}
	return s
}

// end is the offset the next message will get.
func (s *streamLog) end() int64 { return s.first + int64(len(s.entries)) }

// append stores m at the next offset, rolling to a new segment (and
// applying retention) when the current one is full.
func (s *streamLog) append(m *message, now int64) {
	size := int64(len(m.body)) + streamRecordOverhead
	n := len(s.segments)
	if n == 0 || s.segments[n-1].bytes >= s.segSize {
		s.segments = append(s.segments, segment{first: s.end()})
		s.retain(now)
		n = len(s.segments)
	}
	seg := &s.segments[n-1]
	seg.bytes += size
	seg.lastTS = now
	s.entries = append(s.entries, streamEntry{m: m, ts: now})
}

// retain drops whole segments, oldest first, that are older than max age
// or push the total past max bytes; the segment being written stays.
func (s *streamLog) retain(now int64) {
	var total int64
	for _, g := range s.segments {
		total += g.bytes
	}
	drop := 0
	for drop < len(s.segments)-1 {
		g := s.segments[drop]
		old := s.maxAge > 0 && g.lastTS < now-s.maxAge
		big := s.maxBytes > 0 && total > s.maxBytes
		if !old && !big {
			break
		}
		total -= g.bytes
		drop++
	}
	if drop == 0 {
		return
	}
	cut := s.segments[drop].first
	k := int(cut - s.first)
	clear(s.entries[:k])
	s.entries = append(s.entries[:0:0], s.entries[k:]...)
	s.first = cut
	s.segments = append(s.segments[:0:0], s.segments[drop:]...)
}

// start resolves an x-stream-offset argument to the first offset a new
// consumer reads; ok is false when the value is not one RabbitMQ accepts.
func (s *streamLog) start(v any, present bool) (int64, bool) {
	if !present {
		return s.end(), true
	}
	if n, isInt := toInt64(v); isInt {
		return min(max(n, s.first), s.end()), true
	}
	switch x := v.(type) {
	case string:
		switch x {
		case "first":
			return s.first, true
		case "next":
			return s.end(), true
		case "last":
			// The last chunk; every publish is a chunk here.
			if len(s.entries) == 0 {
				return s.end(), true
			}
			return s.end() - 1, true
		}
	case time.Time:
		// AMQP timestamps are whole seconds on the wire.
		at := x.Truncate(time.Second).UnixNano()
		for i, e := range s.entries {
			if e.ts >= at {
				return s.first + int64(i), true
			}
		}
		return s.end(), true
	}
	return 0, false
}

// parseMaxAge reads RabbitMQ's x-max-age form: a positive integer and one
// of the units Y, M, D, h, m, s.
func parseMaxAge(v string) (int64, bool) {
	if len(v) < 2 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'Y':
		unit = 365 * 24 * time.Hour
	case 'M':
		unit = 30 * 24 * time.Hour
	case 'D':
		unit = 24 * time.Hour
	case 'h':
		unit = time.Hour
	case 'm':
		unit = time.Minute
	case 's':
		unit = time.Second
	default:
		return 0, false
	}
	return n * int64(unit), true
}

// validateStream refuses what RabbitMQ refuses for a new stream.
func validateStream(spec transport.QueueSpec) *transport.Error {
	for _, p := range []struct {
		bad  bool
		name string
	}{{spec.Exclusive, "exclusive"}, {spec.AutoDelete, "auto-delete"}, {!spec.Durable, "non-durable"}} {
		if p.bad {
			return chanErr(transport.CodePreconditionFailed, "PRECONDITION_FAILED",
				"invalid property '%s' for queue '%s' in vhost '/'", p.name, spec.Name)
		}
	}
	invalid := func(arg string) *transport.Error {
		return chanErr(transport.CodePreconditionFailed, "PRECONDITION_FAILED", "invalid arg '%s' for queue '%s' in vhost '/'", arg, spec.Name)
	}
	if v, ok := spec.Args["x-max-age"]; ok {
		s, isStr := v.(string)
		if _, valid := parseMaxAge(s); !isStr || !valid {
			return invalid("x-max-age")
		}
	}
	for _, k := range []string{"x-max-length-bytes", "x-stream-max-segment-size-bytes"} {
		if v, ok := spec.Args[k]; ok {
			if n, isInt := toInt64(v); !isInt || n < 0 {
				return invalid(k)
			}
		}
	}
	return nil
}

// appendStream stores m in the stream and feeds waiting consumers.
func (q *queue) appendStream(m *message) {
	q.mu.Lock()
	if !q.deleted {
		q.stream.append(m, time.Now().UnixNano())
		q.dispatchStreamLocked()
	}
	q.mu.Unlock()
}

// dispatchStreamLocked hands each consumer the messages after its position,
// up to its prefetch. A consumer whose position retention removed moves on
// to the first retained message, as on RabbitMQ.
func (q *queue) dispatchStreamLocked() {
	s := q.stream
	end := s.end()
	for _, c := range q.consumers {
		if c.cursor < s.first {
			c.cursor = s.first
		}
		woke := len(c.outbox) > 0
		for c.cursor < end && c.inflight < c.prefetch {
			se := s.entries[c.cursor-s.first]
			c.outbox = append(c.outbox, entry{m: se.m, offset: c.cursor})
			c.cursor++
			c.inflight++
			q.unacked++
		}
		if !woke && len(c.outbox) > 0 {
			select {
			case c.wake <- struct{}{}:
			default:
			}
		}
	}
}

func errStreamPrefetch(name string) *transport.Error {
	return chanErr(transport.CodePreconditionFailed, "PRECONDITION_FAILED",
		"consumer prefetch count is not set for 'queue '%s' in vhost '/''", name)
}

func errStreamOffset(name string) *transport.Error {
	return chanErr(transport.CodePreconditionFailed, "PRECONDITION_FAILED",
		"invalid arg 'x-stream-offset' for queue '%s' in vhost '/'", name)
}

func errStreamGet(name string) *transport.Error {
	e := &transport.Error{Code: 540, Reason: "NOT_IMPLEMENTED - basic.get not supported by stream queues queue '" + name + "' in vhost '/'", Server: true, Connection: true}
	return e
}

// seek places a new stream consumer at the position its x-stream-offset
// argument names; false when the argument is invalid. The caller holds
// q.mu.
func (c *consumer) seek(args transport.Table) bool {
	v, present := args["x-stream-offset"]
	at, ok := c.q.stream.start(v, present)
	c.cursor = at
	return ok
}

func (ch *channel) currentPrefetch() int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.prefetch
}

func errStreamNack(name string) *transport.Error {
	return &transport.Error{Code: 540, Reason: "NOT_IMPLEMENTED - basic.nack and basic.reject not supported by stream queues queue '" + name + "' in vhost '/'", Server: true, Connection: true}
}
