package memory

import (
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// TestStreamRetentionRemovesWholeSegmentsOnRoll drives the log with its own
// clock: retention waits for a segment to fill, removes only whole
// segments, and never the one being written, by age and by bytes.
func TestStreamRetentionRemovesWholeSegmentsOnRoll(t *testing.T) {
	body := make([]byte, 100-streamRecordOverhead) // 100 bytes a record
	msg := &message{body: body}
	t.Run("age", func(t *testing.T) {
		s := newStreamLog(transport.Table{"x-max-age": "10s", "x-stream-max-segment-size-bytes": int64(300)})
		now := int64(time.Hour)
		for range 7 { // segments [0 1 2] [3 4 5] [6]
			s.append(msg, now)
		}
		if s.first != 0 || len(s.segments) != 3 {
			t.Fatalf("before ageing: first %d, %d segments; want 0 and 3", s.first, len(s.segments))
		}
		later := now + int64(11*time.Second)
		s.append(msg, later) // fills the active segment [6 7]: no roll, nothing removed
		if s.first != 0 {
			t.Fatalf("retention ran without a roll: first %d", s.first)
		}
		s.append(msg, later) // [6 7 8]
		s.append(msg, later) // rolls: [0-2] and [3-5] are old; [6-8] holds fresh messages
		if s.first != 6 || s.end() != 10 {
			t.Fatalf("after the roll: first %d end %d, want 6 and 10", s.first, s.end())
		}
	})
	t.Run("bytes", func(t *testing.T) {
		s := newStreamLog(transport.Table{"x-max-length-bytes": int64(500), "x-stream-max-segment-size-bytes": int64(200)})
		for range 9 { // [0 1] [2 3] [4 5] [6 7] [8]: 900 bytes
			s.append(msg, 1)
		}
		// Each roll dropped the oldest whole segments until at most 500
		// bytes remained, counting the new empty segment.
		if s.first != 4 || s.end() != 9 {
			t.Fatalf("first %d end %d, want 4 and 9", s.first, s.end())
		}
	})
}

func TestStreamStartPositions(t *testing.T) {
	s := newStreamLog(nil)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 4 {
		s.append(&message{}, base.Add(time.Duration(i)*time.Second).UnixNano())
	}
	for _, c := range []struct {
		v    any
		want int64
	}{
		{"first", 0}, {"last", 3}, {"next", 4}, {int64(2), 2}, {int32(-5), 0}, {int64(99), 4},
		{base.Add(1500 * time.Millisecond), 1}, // whole seconds: the message stored at 1 s
		{base.Add(time.Hour), 4},
	} {
		if got, ok := s.start(c.v, true); !ok || got != c.want {
			t.Errorf("start(%v) = %d, %v; want %d", c.v, got, ok, c.want)
		}
	}
	if _, ok := s.start("middle", true); ok {
		t.Error(`start("middle") accepted an offset RabbitMQ refuses`)
	}
	if got, _ := s.start(nil, false); got != 4 {
		t.Errorf("no x-stream-offset starts at %d, want next (4)", got)
	}
}
