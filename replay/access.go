package replay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/memory"
)

// AMQP 0-9-1 cannot read a message without taking it, so a read (Browse,
// and the messages a replay's filter declines) takes messages and hands
// them back. Whether handing one back counts as a delivery depends on the
// broker and the queue:
//
//   - a classic queue counts nothing and has no delivery limit;
//   - a quorum queue on RabbitMQ before 4.3 counts every return (a nack, a
//     reject, a closed channel) in x-delivery-count and toward its delivery
//     limit: none by default on 3.x, 20 by default on 4.x unless the
//     x-delivery-limit argument or a delivery-limit policy says -1;
//   - RabbitMQ 4.3 and later count a reject or a closed channel but not a
//     basic.nack with requeue, which is how a read hands messages back; a
//     quorum queue whose delayed retry covers returned messages would hold
//     them back for a while, though;
//   - the in-process broker keeps no delivery limit.
//
// Inspect works out which case a queue is in; a read that would move a
// message toward a delivery limit, or hold it back, is refused unless the
// caller says AllowUnsafeRead.

// Access is what a read of one queue does to the messages it reads, as the
// broker (its version, from the connection) and the queue (its type,
// arguments and policies, from RabbitMQ's management API) say.
type Access struct {
	// Queue is the queue inspected.
	Queue string
	// Broker is the broker's product and version ("RabbitMQ 4.0.5").
	Broker string
	// Type is the queue's type: "classic", "quorum" or "stream"; "" when
	// it could not be learned.
	Type string
	// DeliveryLimit is the delivery limit in force on a quorum queue; 0
	// when the queue has none (or is not a quorum queue). On RabbitMQ 3.x
	// a negative limit is one that every return exceeds.
	DeliveryLimit int
	// LimitFrom says where DeliveryLimit comes from: "the x-delivery-limit
	// argument", a policy, RabbitMQ 4's default.
	LimitFrom string
	// Counted reports whether a message a read hands back counts as a
	// delivery (x-delivery-count goes up by one).
	Counted bool
	// ReturnByNack reports how a read hands messages back: with one
	// basic.nack (requeue), which RabbitMQ 4.3 and later do not count on a
	// quorum queue with a delivery limit, rather than by closing its
	// channel, which keeps their place in a quorum queue without one
	// (there a nack would put them at the back).
	ReturnByNack bool
	// Safe reports whether a read leaves every message as it was, in its
	// place, moved toward no delivery limit (the redelivered flag aside,
	// and, where Counted, x-delivery-count on a queue without a limit).
	Safe bool
	// Why says in a sentence what a read does and, when it is not safe,
	// what would make it so.
	Why string
}

// UnsafeReadError is the refusal of a read that would move messages
// toward a delivery limit, hold them back, or whose effect could not be
// learned (Access says which and why). The caller may read anyway with
// AllowUnsafeRead.
type UnsafeReadError struct {
	Access Access
}

// Error says which queue was not read, why, and how to read it anyway.
func (e *UnsafeReadError) Error() string {
	return fmt.Sprintf("acemq: not reading %q: %s (to read it anyway, accepting that, pass replay.AllowUnsafeRead)", e.Access.Queue, strings.TrimSuffix(e.Access.Why, "."))
}

// ManagementAPI names RabbitMQ's management HTTP API (its URL, with
// credentials: http://user:pass@host:15672/) and the virtual host of the
// queues, which a read asks for a queue's type, arguments and policies.
// Without it, a read on RabbitMQ is refused (UnsafeReadError) unless
// AllowUnsafeRead, since whether it counts deliveries cannot be known.
// With it, a count of 0 is confirmed before it is believed (Count).
func ManagementAPI(url, vhost string) Option {
	return func(c *config) { c.mgmtURL, c.vhost = url, vhost }
}

// AllowUnsafeRead lets a read go ahead where it moves messages toward a
// delivery limit (a quorum queue with one, before RabbitMQ 4.3), holds
// them back (a quorum queue that delays returned messages) or where that
// cannot be learned: each message read then counts one delivery. For an
// operator who has been told so and chose to read.
func AllowUnsafeRead() Option { return func(c *config) { c.unsafe = true } }

// Inspect says what a read of queue would do to the messages it reads,
// from the broker's version (which the connection learned when it opened)
// and, on RabbitMQ, the queue's type, arguments and the policies that
// apply to it (ManagementAPI). A management API that cannot be asked
// leaves Type "" and the read not Safe; the error is for a broker that
// cannot be asked at all (no channel).
func Inspect(ctx context.Context, conn *acemq.Conn, queue string, opts ...Option) (Access, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	return inspect(ctx, conn, queue, &cfg)
}

func inspect(ctx context.Context, conn *acemq.Conn, queue string, cfg *config) (Access, error) {
	ch, err := conn.Channel(ctx)
	if err != nil {
		return Access{Queue: queue}, fmt.Errorf("acemq: cannot open a channel to inspect %q: %w", queue, err)
	}
	var srv transport.Server
	if r, ok := ch.(transport.ServerReporter); ok {
		srv = r.Server()
	}
	_ = ch.Close()
	b := brokerOf(srv)
	if b.memory {
		return judge(queue, b, nil, nil), nil
	}
	if cfg.mgmtURL == "" {
		return judge(queue, b, nil, errors.New("no management API was named (replay.ManagementAPI; the acemq command's --management-url)")), nil
	}
	facts, err := askManagement(ctx, cfg.mgmtURL, cfg.vhost, queue)
	return judge(queue, b, facts, err), nil
}

// broker is what a read's safety depends on about the broker.
type broker struct {
	name         string // for sentences: "RabbitMQ 4.0.5"
	memory       bool
	rabbit       bool
	major, minor int // 0, 0 when unknown
}

func brokerOf(s transport.Server) broker {
	b := broker{name: strings.TrimSpace(s.Product + " " + s.Version)}
	switch {
	case s.Product == memory.Product:
		b.memory = true
	case strings.EqualFold(s.Product, "RabbitMQ"):
		b.rabbit = true
	}
	if b.name == "" {
		b.name = "the broker (it did not name itself)"
	}
	parts := strings.SplitN(s.Version, ".", 3)
	if len(parts) >= 2 {
		maj, err1 := strconv.Atoi(parts[0])
		min, err2 := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
		if err1 == nil && err2 == nil {
			b.major, b.minor = maj, min
		}
	}
	return b
}

// nackUncounted: RabbitMQ 4.3 and later do not count a return by
// basic.nack with requeue.
func (b broker) nackUncounted() bool {
	return b.rabbit && (b.major > 4 || b.major == 4 && b.minor >= 3)
}

// judge decides a read's Access from the broker and what the management
// API said about the queue (nil with why when it could not be asked).
func judge(queue string, b broker, q *queueFacts, why error) Access {
	a := Access{Queue: queue, Broker: b.name}
	if b.memory {
		// memory:// counts as RabbitMQ 4.3 does: a return by basic.nack
		// moves no message toward a quorum queue's delivery limit.
		a.Type, a.Safe, a.ReturnByNack = "classic", true, true
		a.Why = "the in-process broker counts as RabbitMQ 4.3 does, and a read hands every message back with basic.nack, which moves none toward a delivery limit (each is marked redelivered)"
		return a
	}
	if q == nil {
		reason := "the broker's version is unknown, so how it counts a returned message is too"
		if b.rabbit && b.major > 0 {
			reason = fmt.Sprintf("%s counts a returned message as a delivery on a quorum queue with a delivery limit", b.name)
			if b.nackUncounted() {
				reason = fmt.Sprintf("%s holds back a returned message on a quorum queue with delayed retry", b.name)
			}
		}
		a.Why = fmt.Sprintf("%s, and whether %q is such a queue could not be learned: %s; name the management API so the queue can be inspected",
			reason, queue, strings.TrimPrefix(strings.TrimSuffix(errText(why), "."), "acemq: "))
		return a
	}
	a.Type = q.Type
	switch q.Type {
	case "classic":
		a.Safe = true
		a.Why = "a classic queue counts no deliveries and has no delivery limit: a read hands every message back where it was (marked redelivered)"
		return a
	case "stream":
		a.Why = "it is a stream, which a read that takes and returns messages does not suit; read it with the stream package (offsets, nothing taken)"
		return a
	case "quorum":
	default:
		a.Why = fmt.Sprintf("its type %q is one this read does not know, so what a returned message does there is unknown", q.Type)
		return a
	}
	a.Counted = true
	limit, from, unlimited := q.deliveryLimit(b)
	if unlimited {
		// A quorum queue without a limit puts a message handed back with
		// basic.nack at the back (RabbitMQ 3.10 to 4.3 alike), so the read
		// hands them back by closing its channel, which keeps their place
		// and counts a delivery that no limit acts on.
		if d := q.delays(b, "failed"); d != "" {
			a.Why = fmt.Sprintf("%s holds back a message handed back to this quorum queue by a closed channel (%s), so a read would take every message it reads out of the queue for a while and put it back out of order; set delayed-retry-type to \"returned\" or \"disabled\" for it", b.name, d)
			return a
		}
		a.Safe = true
		a.Why = fmt.Sprintf("%s counts each read in x-delivery-count, but this quorum queue has no delivery limit (%s), so nothing acts on the count", b.name, from)
		return a
	}
	if b.nackUncounted() {
		a.Counted, a.ReturnByNack = false, true
		a.DeliveryLimit, a.LimitFrom = limit, from
		if d := q.delays(b, "returned"); d != "" {
			a.Why = fmt.Sprintf("%s holds back a message handed back to this quorum queue with basic.nack (%s), so a read would take every message it reads out of the queue for a while and put it back out of order; set delayed-retry-type to \"failed\" or \"disabled\" for it", b.name, d)
			return a
		}
		a.Safe = true
		a.Why = fmt.Sprintf("%s does not count a message handed back with basic.nack, which is how a read hands this quorum queue's messages back: the read moves none toward its delivery limit of %d (%s)", b.name, limit, from)
		return a
	}
	a.DeliveryLimit, a.LimitFrom = limit, from
	fix := "give it no limit (a policy with \"delivery-limit\": -1 on RabbitMQ 4 outranks the default; or declare it with x-delivery-limit -1), or upgrade to RabbitMQ 4.3, which does not count a read's returns"
	if b.major > 0 && b.major < 4 {
		fix = "remove its limit (RabbitMQ 3.x has none by default: drop the x-delivery-limit argument or the delivery-limit policy), or upgrade to RabbitMQ 4.3, which does not count a read's returns"
	}
	if limit < 0 {
		a.Why = fmt.Sprintf("%s treats this quorum queue's delivery limit of %d (%s) as one every return exceeds, so a read would dead-letter or drop every message it reads; %s", b.name, limit, from, fix)
		return a
	}
	a.Why = fmt.Sprintf("%s counts every message a read hands back toward this quorum queue's delivery limit of %d (%s), so each read moves every message it reads one delivery nearer to being dead-lettered or dropped; %s", b.name, limit, from, fix)
	return a
}

func errText(err error) string {
	if err == nil {
		return "no reason given"
	}
	return err.Error()
}
