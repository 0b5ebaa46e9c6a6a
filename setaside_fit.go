package acemq

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/internal/idtext"
	"github.com/acemq-go/acemq/transport"
)

// A set-aside copy carries the original's headers plus the reason, so a
// delivery whose content header was just under frame_max makes a copy over
// it. Written anyway, the broker would close the publishing connection and
// the delivery would come back for ever; so the transport refuses it
// (transport.CheckFrameMax) and the copy is made to fit here instead: the
// largest headers are left out, application headers first, and the reason
// says which and why. The body, id and claim are always kept.

// maxKeptReason bounds a reason (the handler's error text) on a copy that
// had to be made to fit (a quarter of frame_max when that is smaller).
const maxKeptReason = 4096

// frameLimit returns the frame_max refusal err carries, or nil.
func frameLimit(err error) *transport.LimitError {
	var le *transport.LimitError
	if errors.As(err, &le) && le.Limit == transport.LimitFrameMax {
		return le
	}
	return nil
}

// fitCopy makes msg, a set-aside copy that le says is over frame_max, fit
// in one frame: it truncates a reason longer than maxKeptReason, then leaves
// out the largest headers (application headers before the envelope's own;
// never the id, the reason or a claim) until the content header fits, and
// appends to the reason what was left out and why. It reports whether the
// copy should fit now; msg.Headers must be the copy's own table.
func fitCopy(msg *transport.Message, le *transport.LimitError) bool {
	h := msg.Headers
	reason, _ := h[header.Error].(string)
	size := le.Size - len(reason)
	if keep := min(maxKeptReason, le.Max/4); len(reason) > keep {
		cut := len(reason) - keep
		reason = strings.ToValidUTF8(reason[:keep], "") + fmt.Sprintf(" … (%d bytes of the reason cut)", cut)
	}
	size += len(reason)

	type entry struct {
		name string
		size int
		own  bool // the envelope's own (x-acemq-)
	}
	var cands []entry
	for name, v := range h {
		switch name {
		case header.ID, header.Error, header.Claim:
			continue
		}
		cands = append(cands, entry{name, transport.HeaderSize(name, v), strings.HasPrefix(name, header.ReservedPrefix)})
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].own != cands[j].own {
			return !cands[i].own
		}
		if cands[i].size != cands[j].size {
			return cands[i].size > cands[j].size
		}
		return cands[i].name < cands[j].name
	})
	var left []string
	note := func() string {
		if len(left) == 0 {
			return ""
		}
		return fmt.Sprintf("; this copy leaves out %s: with them its content header would have been a frame of %d bytes, over the connection's frame_max of %d", strings.Join(left, ", "), le.Size, le.Max)
	}
	for _, c := range cands {
		if size+len(note()) <= le.Max {
			break
		}
		delete(h, c.name)
		size -= c.size
		left = append(left, fmt.Sprintf("header %q (%d bytes)", c.name, c.size))
	}
	if orig, _ := h[header.Error].(string); len(left) == 0 && len(reason) == len(orig) {
		return false // nothing could be made smaller
	}
	h[header.Error] = reason + note()
	return size+len(note()) <= le.Max
}

// neverWritable returns what says that a hop can never be written as it
// stands, or nil: a frame_max or size refusal (*transport.LimitError, said
// as the limit), or a message AMQP cannot carry (transport.ErrUnencodable,
// a short string over 255 bytes included; ErrHeaderLimit; a body the
// broker refuses as over its max_message_size), said as the
// refusal. Sending it again unchanged cannot help.
func neverWritable(err error) error {
	var le *transport.LimitError
	if errors.As(err, &le) {
		return le
	}
	if errors.Is(err, transport.ErrUnencodable) || errors.Is(err, ErrHeaderLimit) || errors.Is(err, ErrMessageTooLarge) {
		return err
	}
	return nil
}

// hopNeverWritable handles a retry or put-back copy that can never be
// written (neverWritable): instead of being handed back to the broker to
// come round again, the delivery is set aside to {q}.dlq (made to fit
// there, or as a minimal copy in {q}.parked). It reports whether err was
// such a refusal.
func (k *consumerCore) hopNeverWritable(dv *delivery, env Envelope, what string, err, cause error) bool {
	why := neverWritable(err)
	if why == nil {
		return false
	}
	reason := fmt.Sprintf("its %s could not be written (%s), so it was set aside instead", what, cutText(why.Error(), maxMinimalCause))
	if cause != nil {
		reason += ": " + cause.Error()
	}
	k.env.logger.Warn("acemq: a message's "+what+" can never be written; setting it aside", "queue", k.queue, "id", idtext.Short(env.ID), "error", why)
	k.setAside(dv, env, DeadLetterQueue(k.queue), reason)
	return true
}
