package acemq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/internal/idtext"
	"github.com/acemq-go/acemq/transport"
)

// Setting a message aside, and what happens when its copy is refused.
//
// A set-aside copy is written so that it can always be written, whatever
// arrived: an id longer than an AMQP short string goes in the x-acemq-id
// header only (messageIDProperty), and a copy over frame_max leaves out
// its largest headers (fitCopy). When the broker refuses the copy anyway
// (its target is missing or full, the copy was nacked, not confirmed in
// time), the last resort is a minimal copy in {q}.parked: the body, the
// id, the reason and a list of what was left out. Only when even that is
// refused does the delivery go back to the broker (lastResort).

// messageIDProperty is the AMQP message_id property a hop writes for
// envelope id: the id itself when it fits in a short string, else none.
// The x-acemq-id header, which every reader takes first (contract §1.1),
// always carries the whole id.
func messageIDProperty(id string) string {
	if len(id) > transport.MaxShortString {
		return ""
	}
	return id
}

// idNote is what a set-aside copy's reason says about an id too long for
// the message_id property, or "".
func idNote(id string) string {
	if len(id) <= transport.MaxShortString {
		return ""
	}
	return fmt.Sprintf("; the message id is %d bytes, longer than the %d an AMQP message_id property holds, so this copy carries it in its x-acemq-id header only", len(id), transport.MaxShortString)
}

// setAside copies the message into target with the reason and acks the
// original; settleAside without the report. A copy over frame_max is made
// to fit (fitCopy) and written once more. A copy the broker refuses is
// followed by a minimal one in {q}.parked; only if that is refused too
// does lastResort decide what happens to the delivery. The copies share
// one bound (setAsideBound), detached from the handler's context.
func (k *consumerCore) setAside(dv *delivery, env Envelope, target, reason string) {
	ctx, cancel := hopContext()
	defer cancel()
	err := k.copyAside(ctx, dv, env, target, reason+idNote(env.ID))
	if err == nil {
		k.ack(dv)
		return
	}
	f := Fallback{Kind: "set_aside_failed", Queue: k.queue, Target: target, Envelope: env, Err: err}
	k.fallback(f)
	parked := ParkedQueue(k.queue)
	k.env.logger.Error("acemq: a message could not be set aside; a minimal copy goes to "+parked+" instead", "queue", k.queue, "id", idtext.Short(env.ID), "target", target, "error", err)
	if !dv.att.alive() || ctx.Err() != nil {
		k.notSetAside(f)
		k.lastResort(dv, env, err, err)
		return
	}
	perr := k.minimalAside(ctx, dv, env, target, reason, err)
	if perr == nil {
		k.env.logger.Warn("acemq: set a minimal copy of a message aside; its x-acemq-error says what it leaves out", "queue", k.queue, "id", idtext.Short(env.ID), "target", parked)
		k.ack(dv)
		return
	}
	f = Fallback{Kind: "set_aside_failed", Queue: k.queue, Target: parked, Envelope: env, Err: perr}
	k.fallback(f)
	k.env.logger.Error("acemq: not even a minimal copy of a message could be set aside", "queue", k.queue, "id", idtext.Short(env.ID), "target", parked, "error", perr)
	k.notSetAside(f)
	k.lastResort(dv, env, err, perr)
}

// notSetAside tells ConsumerConfig.OnSetAsideFailed, when set, that the
// delivery could not be set aside at all (f is the last copy refused), on
// the worker that settles it, before lastResort and before the worker
// takes another delivery.
func (k *consumerCore) notSetAside(f Fallback) {
	if k.asideFailed != nil {
		k.asideFailed(f)
	}
}

// copyAside publishes the set-aside copy of dv into target with reason in
// its x-acemq-error, made to fit once when it is over frame_max.
func (k *consumerCore) copyAside(ctx context.Context, dv *delivery, env Envelope, target, reason string) error {
	cp := env
	cp.Error = reason
	msg := k.hopMessage(dv, cp, target)
	err := k.host.hop(ctx, msg)
	if le := frameLimit(err); le != nil && fitCopy(msg, le) {
		k.env.logger.Warn("acemq: a set-aside copy was over frame_max; it leaves out headers, and its x-acemq-error says which", "queue", k.queue, "id", idtext.Short(env.ID), "target", target, "error", le)
		err = k.host.hop(ctx, msg)
	}
	return err
}

// minimalAside publishes the minimal copy of dv into {q}.parked, after
// its copy to target was refused with cause. An id whose header makes even
// that copy over frame_max is cut to fit, and the copy written once more.
func (k *consumerCore) minimalAside(ctx context.Context, dv *delivery, env Envelope, target, reason string, cause error) error {
	err := k.host.hop(ctx, minimalCopy(dv, env, ParkedQueue(k.queue), target, reason, cause, false))
	if frameLimit(err) != nil && len(env.ID) > transport.MaxShortString {
		err = k.host.hop(ctx, minimalCopy(dv, env, ParkedQueue(k.queue), target, reason, cause, true))
	}
	return err
}

// maxMinimalCause bounds the refusal's text quoted in a minimal copy's
// reason (an error may quote a value of any length).
const maxMinimalCause = 1024

// maxListedHeaders bounds the header names a minimal copy's reason lists.
const maxListedHeaders = 20

// minimalCopy builds the last-resort copy of a delivery whose copy to
// target was refused with cause: persistent and mandatory to parked, with
// the original body and content type, the id in x-acemq-id (cut to a
// short string, with its SHA-256, when cutID), and an x-acemq-error that
// gives the reason, the refusal and every part of the message it leaves
// out.
func minimalCopy(dv *delivery, env Envelope, parked, target, reason string, cause error, cutID bool) *transport.Message {
	id := env.ID
	var b strings.Builder
	b.WriteString(cutText(reason, maxKeptReason))
	fmt.Fprintf(&b, "; this is a minimal copy: the copy to %s was refused (%s), so this one keeps only the body, the id and this reason", target, cutText(errText(cause), maxMinimalCause))
	var left []string
	for name := range dv.d.Headers {
		if name != header.ID && name != header.Error {
			left = append(left, name)
		}
	}
	sort.Strings(left)
	if len(left) > 0 {
		shown := left[:min(len(left), maxListedHeaders)]
		for i, n := range shown {
			shown[i] = fmt.Sprintf("%q", cutText(n, 64))
		}
		fmt.Fprintf(&b, "; it leaves out %d headers: %s", len(left), strings.Join(shown, ", "))
		if len(left) > len(shown) {
			fmt.Fprintf(&b, " and %d more", len(left)-len(shown))
		}
	}
	if dv.d.ReplyTo != "" {
		b.WriteString("; it leaves out the reply-to property")
	}
	if dv.d.Priority != 0 {
		b.WriteString("; it leaves out the priority")
	}
	if cutID {
		sum := sha256.Sum256([]byte(env.ID))
		id = cutText(env.ID, transport.MaxShortString)
		fmt.Fprintf(&b, "; its id is %d bytes, too long for even this copy: x-acemq-id holds its first %d bytes, and the whole id has SHA-256 %s", len(env.ID), len(id), hex.EncodeToString(sum[:]))
	} else {
		b.WriteString(idNote(id))
	}
	return &transport.Message{
		RoutingKey: parked,
		Mandatory:  true,
		Properties: transport.Properties{
			ContentType:  dv.d.ContentType,
			MessageID:    messageIDProperty(id),
			DeliveryMode: 2,
			Headers:      transport.Table{header.ID: id, header.Error: b.String()},
		},
		Body: dv.d.Body,
	}
}

// cutText returns s cut to at most n bytes of valid UTF-8.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// lastResort settles a delivery that neither its copy (refused with err)
// nor a minimal copy (refused with perr) could set aside. The message is
// never dropped by the library and never left unsettled, and it never
// comes round at once: the first rule that fits applies.
//
//   - Its channel is gone: nothing; the broker delivers it again.
//   - On a stream (ConsumerConfig.OnStream), where nothing can be handed
//     back, with ConsumerConfig.OnSetAsideFailed set (the stream package's
//     reader): acked, which on a stream only returns credit; the hook,
//     told first, keeps the position at the message (the reader holds
//     there).
//   - On a stream without that hook: the delivery is not acked. The
//     consumer's channel is closed, so no later message of that
//     subscription is handled past it, and the consumer re-subscribes with
//     back-off (ArgsAt decides where it starts again).
//   - The consumer is draining: back to the broker at once.
//   - The queue was declared through this Conn with broker dead-lettering
//     and neither refusal was "unroutable": rejected without requeue, into
//     the broker's dead-lettering ({q}.dlq with Topology.DeadLetters).
//   - Otherwise: held 5 s, then back to the broker. Every hand-back is a
//     basic.reject with requeue (handBack), which each RabbitMQ version
//     counts toward a quorum queue's delivery limit.
func (k *consumerCore) lastResort(dv *delivery, env Envelope, err, perr error) {
	switch {
	case !dv.att.alive():
		k.release(dv) // the broker redelivers
	case k.stream && k.asideFailed != nil:
		k.ack(dv) // returns credit; the hook's owner holds at the message
	case k.stream:
		k.stopReading(dv, env, perr)
	case k.isDraining():
		k.handBack(dv)
	case k.host.deadLettering(k.queue) && !IsUnroutable(err) && !IsUnroutable(perr):
		k.reject(dv) // the broker's own dead-lettering is the last resort
	default:
		k.later(dv, inProgressDelay, func(context.Context) { k.handBack(dv) })
	}
}

// stopReading ends a stream consumer's subscription without settling dv,
// whose copies could not be made: closing the channel releases dv unacked
// and stops the deliveries prefetched after it from running, and the
// re-subscriber attaches again after its back-off.
func (k *consumerCore) stopReading(dv *delivery, env Envelope, cause error) {
	k.env.logger.Error("acemq: a stream message could not be set aside, so it is not acked: the consumer stops reading and subscribes again", "queue", k.queue, "id", idtext.Short(env.ID), "error", cause)
	_ = dv.att.ch.Close()
	k.release(dv)
	k.markStalled(fmt.Errorf("acemq: message %s could not be set aside (%w), so the consumer stopped reading before it", idtext.Short(env.ID), cause))
}
