package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/acemq-go/acemq"
)

// replayOptions bound one replay pass (behaviour §7.4).
type replayOptions struct {
	Limit        int    // 0 = no limit
	Filter       filter // nil = every message
	KeepAttempts bool
	// OnMoved is called after each message is republished and its
	// dead-letter copy acked; OnDuplicate when an id is seen twice.
	OnMoved     func(m *acemq.Pulled)
	OnDuplicate func(id string)
}

// replayReport is what a pass did.
type replayReport struct {
	Moved, Skipped int
	Reason         string // drained, limit, cancelled, failed
	Err            error
}

func (r replayReport) String() string {
	return fmt.Sprintf("moved %d, skipped %d (%s)", r.Moved, r.Skipped, r.Reason)
}

// replayQueue moves messages from a {q}.dlq or {q}.parked queue back to
// {q} through the default exchange: it republishes each accepted message's
// original bytes, stamped with provenance, attempt reset to 1 and error
// cleared (unless KeepAttempts), mandatory and confirmed, and only then acks
// the dead-letter copy. Declined messages are held to the end of the pass
// and then returned. A pass examines at most the messages present at its
// start. A failed publish returns that message to its queue and stops.
//
// It stands in for the replay package (not merged when this was written)
// and follows the same rules.
func replayQueue(ctx context.Context, c *acemq.Conn, source string, o replayOptions) (replayReport, error) {
	if !isSetAside(source) {
		return replayReport{}, fmt.Errorf("%q is not a dead-letter queue; replay moves messages from QUEUE.dlq or QUEUE.parked back to QUEUE", source)
	}
	target := sourceOf(source)
	if target == source {
		return replayReport{}, fmt.Errorf("replaying %q into itself would loop forever; pass a .dlq or .parked queue", source)
	}
	present, err := requireQueue(ctx, c, source)
	if err != nil {
		return replayReport{}, err
	}
	if _, err := requireQueue(ctx, c, target); err != nil {
		return replayReport{}, fmt.Errorf("cannot replay into %q: it does not exist; declare it first (acemq topology apply)", target)
	}
	p, err := c.NewPuller(ctx)
	if err != nil {
		return replayReport{}, fmt.Errorf("cannot open a channel to take messages (%s); check the connection and retry", sentence(err))
	}
	var held []*acemq.Pulled
	defer func() {
		for _, m := range held {
			_ = m.Nack(true)
		}
		_ = p.Close()
	}()
	seen := map[string]bool{}
	rep := replayReport{Reason: "drained"}
	for examined := 0; examined < present; examined++ {
		if ctx.Err() != nil {
			rep.Reason = "cancelled"
			return rep, nil
		}
		if o.Limit > 0 && rep.Moved >= o.Limit {
			rep.Reason = "limit"
			return rep, nil
		}
		m, ok, err := p.Pull(ctx, source)
		if err != nil {
			rep.Reason, rep.Err = "failed", err
			return rep, nil
		}
		if !ok {
			break
		}
		if seen[m.Envelope.ID] && o.OnDuplicate != nil {
			o.OnDuplicate(m.Envelope.ID)
		}
		seen[m.Envelope.ID] = true
		if o.Filter != nil && !o.Filter(m) {
			rep.Skipped++
			held = append(held, m)
			continue
		}
		raw := m.Raw("", target)
		stampReplay(raw.Headers, m, source, o.KeepAttempts)
		if err := c.PublishRaw(ctx, raw); err != nil {
			_ = m.Nack(true)
			rep.Reason, rep.Err = "failed", err
			return rep, nil
		}
		if err := m.Ack(); err != nil {
			rep.Reason = "failed"
			rep.Err = fmt.Errorf("message %s was republished but its dead-letter copy could not be removed, so it will be replayed again: %w", m.Envelope.ID, err)
			return rep, nil
		}
		rep.Moved++
		if o.OnMoved != nil {
			o.OnMoved(m)
		}
	}
	return rep, nil
}

// stampReplay writes the provenance headers and, unless keep, resets the
// attempt to 1 and clears the error.
func stampReplay(h map[string]any, m *acemq.Pulled, source string, keep bool) {
	h[acemq.HeaderReplayedFrom] = source
	h[acemq.HeaderReplayedAt] = time.Now().UTC().Format(time.RFC3339)
	h[acemq.HeaderReplayCount] = int64(headerInt(m.Headers[acemq.HeaderReplayCount]) + 1)
	if !keep {
		env := m.Envelope
		env.Attempt = 1
		env.Error = ""
		if v, ok := env.WireHeaders()[acemq.HeaderAttempt]; ok {
			h[acemq.HeaderAttempt] = v
		}
		delete(h, acemq.HeaderError)
	}
}

// headerInt reads an integer header of any wire width.
func headerInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case int8:
		return int(x)
	case int16:
		return int(x)
	case int32:
		return int(x)
	case int64:
		return int(x)
	case uint8:
		return int(x)
	case uint16:
		return int(x)
	case uint32:
		return int(x)
	case uint64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return 0
}
