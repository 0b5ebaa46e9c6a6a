// Package loadline writes the standing-load sample line (contract §7): one
// JSON object per interval, plus a final one on exit, with the fields in
// the contract's order.
//
// The manual's page on the acemq command: https://github.com/acemq-go/acemq/blob/main/docs/command.md
package loadline

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/acemq-go/acemq"
)

// DefaultInterval is the sample interval when Run is given 0.
const DefaultInterval = time.Second

// Sample is one line's data.
type Sample struct {
	At          time.Time
	Elapsed     time.Duration
	Blocked     bool
	Published   int64
	Confirmed   int64
	Consumed    int64
	Failed      int64
	PublishRate float64
	ConsumeRate float64
	Refused     int64
	// Reason is the broker's blocked reason; written only when Blocked.
	Reason string
}

// Source is what a sampler reads: a *acemq.Conn satisfies it.
type Source interface {
	Stats() acemq.StatsSnapshot
	Blocked() bool
	Health(ctx context.Context) acemq.HealthReport
}

// Sampler turns successive readings of a Source into Samples, computing
// the rates over the time since the previous reading. It is not safe for
// concurrent use.
type Sampler struct {
	src       Source
	start     time.Time
	last      acemq.StatsSnapshot
	lastValid bool
}

// NewSampler starts a sampler; elapsed time counts from now.
func NewSampler(src Source) *Sampler {
	return &Sampler{src: src, start: time.Now()}
}

// Sample reads the source now.
func (s *Sampler) Sample() Sample {
	st := s.src.Stats()
	blocked := s.src.Blocked()
	out := Sample{
		At: st.At, Elapsed: st.At.Sub(s.start), Blocked: blocked,
		Published: st.Published, Confirmed: st.Confirmed, Consumed: st.Consumed,
		Failed: st.Failed, Refused: st.Refused,
	}
	if blocked {
		out.Reason = s.src.Health(context.Background()).BlockedReason
		if out.Reason == "" {
			out.Reason = "unknown"
		}
	}
	prev, prevAt := s.last, s.start
	if s.lastValid {
		prevAt = prev.At
	}
	if secs := st.At.Sub(prevAt).Seconds(); secs > 0 {
		out.PublishRate = float64(st.Confirmed-prev.Confirmed) / secs
		out.ConsumeRate = float64(st.Consumed-prev.Consumed) / secs
	}
	s.last, s.lastValid = st, true
	return out
}

// AppendJSON appends the sample's line (without the newline) to b: fields
// at, elapsedMs, blocked, published, confirmed, consumed, failed,
// publishRate, consumeRate, refused, reason — in that order, reason only
// when blocked.
func (x Sample) AppendJSON(b []byte) []byte {
	b = append(b, `{"at":"`...)
	b = x.At.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z")
	b = append(b, `","elapsedMs":`...)
	b = strconv.AppendInt(b, x.Elapsed.Milliseconds(), 10)
	b = append(b, `,"blocked":`...)
	b = strconv.AppendBool(b, x.Blocked)
	b = appendInt(b, "published", x.Published)
	b = appendInt(b, "confirmed", x.Confirmed)
	b = appendInt(b, "consumed", x.Consumed)
	b = appendInt(b, "failed", x.Failed)
	b = appendRate(b, "publishRate", x.PublishRate)
	b = appendRate(b, "consumeRate", x.ConsumeRate)
	b = appendInt(b, "refused", x.Refused)
	if x.Blocked {
		b = append(b, `,"reason":`...)
		b = strconv.AppendQuote(b, x.Reason)
	}
	return append(b, '}')
}

func appendInt(b []byte, name string, v int64) []byte {
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return strconv.AppendInt(b, v, 10)
}

func appendRate(b []byte, name string, v float64) []byte {
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return strconv.AppendFloat(b, float64(int64(v*10+0.5))/10, 'f', -1, 64)
}

// Run writes one line to w every interval (DefaultInterval when ≤ 0) and a
// final line when ctx ends, then returns nil; it returns the write error
// if w fails.
func Run(ctx context.Context, src Source, w io.Writer, interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultInterval
	}
	s := NewSampler(src)
	t := time.NewTicker(interval)
	defer t.Stop()
	var buf []byte
	emit := func() error {
		buf = append(s.Sample().AppendJSON(buf[:0]), '\n')
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("acemq: the load line could not be written: %w", err)
		}
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return emit()
		case <-t.C:
			if err := emit(); err != nil {
				return err
			}
		}
	}
}
