// Package migrate moves one of the library's own queues ({q}.dlq,
// {q}.parked, a rung) from the form the broker holds to the form a Conn's
// Layout declares, under the same name, without losing or duplicating a
// message, and resumably: a run killed at any point is finished by the
// next run. It is the engine of `acemq dlq migrate`.
//
// A queue's type cannot change in place, so a move goes through a
// holding queue of its own, {name}.migrating, in two steps:
//
//  1. The mover subscribes to the old queue exclusively with a prefetch of
//     one (a lock: no console or tool can subscribe while it moves; it
//     holds at most one message, which it reads before anything else), puts
//     a sentinel for its run at the old queue's tail, and takes every
//     message with basic.get, holding each delivered and unacknowledged,
//     so nothing is ever on its way to it unseen. Each batch read is
//     copied to {name}.migrating (confirmed) before the next is read, so
//     the mover holds one batch's bodies whatever the queue holds (the
//     broker holds the originals), stamped with the run and its position
//     (acemq-migration: "{run}/{seq}"). Once the old queue has no ready
//     message left it is deleted only if it still has none, in one step by
//     the broker (queue.delete if-empty: a dead letter that arrived
//     meanwhile stops the delete, is copied too, and the delete is tried
//     again); the held originals go with it. A commit marker with the
//     run's count then goes to {name}.migrating.
//  2. The queue is declared again in the new form, bound as before, and
//     every copy of a committed run moves to it (confirmed, then acked on
//     {name}.migrating), keeping its stamp; a copy whose stamp the new
//     queue already holds (a kill between a copy and its ack) is acked
//     without a second copy. {name}.migrating is deleted at the end.
//
// A run killed before its delete leaves copies without a commit marker
// while the old queue still holds every original and the run's sentinel:
// the next run finds the sentinel and voids those copies (a marker; they
// are skipped). Without the sentinel in the old queue the run's delete
// happened (the queue there now was declared again since), and its copies
// count. Every run first waits until no other subscriber holds the old or
// the holding queue, so the messages a killed run held are back in place
// before it reads them.
//
// Between the delete and the declaration (milliseconds) the queue does
// not exist: a set-aside copy published to it comes back unroutable and
// the engine keeps the message on its source queue (it is set aside
// again later), but a message the broker itself dead-letters into it in
// that moment is dropped, as RabbitMQ drops a dead letter with no route.
// A reader that takes messages with basic.get (not a subscription) while
// the old queue is deleted would lose the ones it holds: run nothing else
// on the queue during a move. And RabbitMQ confirms a message that was on
// its way to a queue when the queue was deleted (the queue ended normally,
// so the channel counts it as handled): a dead letter set aside in the very
// moment of the delete can be confirmed and gone. Measured with a writer
// publishing by name every 3 ms: 1 of 60 such messages on 3.10.8; none
// when nothing is set aside during the delete. Move a queue when its
// source is quiet, or stop its consumers for the moment the progress line
// "deleting the old …" takes.
//
// The old queue must be classic: RabbitMQ cannot delete a quorum queue
// only if it is empty, so moving one (the replicated layout back to
// classic, or a quorum queue declared with other arguments) needs every
// writer stopped first (Options.WritersStopped).
package migrate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
)

// Header names the mover writes.
const (
	// StampHeader is on every moved message: "{run}/{seq}".
	StampHeader = "acemq-migration"
	// MarkerHeader is on the mover's own marker messages in
	// {name}.migrating: "commit {run}" or "void {run}".
	MarkerHeader = "acemq-migration-marker"
)

// Suffix is added to a queue's name for the holding queue of its move.
const Suffix = ".migrating"

// Options shape a move.
type Options struct {
	// Progress receives one line per step and per batch; nil discards.
	Progress io.Writer
	// Batch is how many messages go per confirmed batch (default 200).
	Batch int
	// WritersStopped lets a quorum queue be moved: the caller says no
	// service publishes to it or dead-letters into it until the move ends,
	// since RabbitMQ cannot delete a quorum queue only if it is empty.
	WritersStopped bool
	// Binding, when set, is the binding the queue is given again in its
	// new form ({q}.dlq and {q}.parked: acemq.dlx on their own name).
	Binding *transport.BindingSpec
}

// Report says what one move did.
type Report struct {
	Queue string
	// Already is true when the queue was in the target form with nothing
	// left to move.
	Already bool
	// Copied counts messages copied out of the old queue by this run;
	// Voided the copies of an interrupted run found still in the old
	// queue and voided; Moved the messages that reached the queue in its
	// new form; Skipped those it held already (an interrupted step 2).
	Copied, Voided, Moved, Skipped int
}

func (r Report) String() string {
	if r.Already {
		return fmt.Sprintf("%s: already in the target form, nothing to move", r.Queue)
	}
	return fmt.Sprintf("%s: copied %d out of the old queue, moved %d into the new one (%d already there, %d earlier copies voided)", r.Queue, r.Copied, r.Moved, r.Skipped, r.Voided)
}

type mover struct {
	c      *acemq.Conn
	target acemq.Declaration // the queue in its new form
	hold   transport.QueueSpec
	o      Options
	rep    Report
}

// Queue moves the queue target names to target's form. target comes from
// Conn.LayoutDeclarations on a Conn with the layout to move to. It
// returns what it did; on an error, running it again finishes the move.
func Queue(ctx context.Context, c *acemq.Conn, target acemq.Declaration, hold acemq.Declaration, o Options) (Report, error) {
	if o.Batch <= 0 {
		o.Batch = 200
	}
	h := hold.Queue
	h.Name = target.Queue.Name + Suffix
	m := &mover{c: c, target: target, hold: h, o: o, rep: Report{Queue: target.Queue.Name}}
	err := m.run(ctx)
	return m.rep, err
}

func (m *mover) logf(format string, args ...any) {
	if m.o.Progress != nil {
		fmt.Fprintf(m.o.Progress, "migrate: "+format+"\n", args...)
	}
}

// form is what the broker holds under a name.
type form int

const (
	absent form = iota
	oldForm
	targetForm
)

// state tells whether name is missing, in the target form, or in another
// form; for another form it also tells whether that form is classic.
func (m *mover) state(ctx context.Context) (f form, classic bool, err error) {
	name := m.target.Queue.Name
	if _, err := m.declare(ctx, transport.QueueSpec{Name: name, Passive: true}); err != nil {
		if transport.Code(err) == transport.CodeNotFound {
			return absent, false, nil
		}
		return 0, false, fmt.Errorf("acemq: cannot check queue %s: %w", name, err)
	}
	_, err = m.declare(ctx, m.target.Queue)
	switch {
	case err == nil:
		return targetForm, false, nil
	case transport.Code(err) == transport.CodePreconditionFailed:
		// The target is a quorum queue, and the broker's differs in its
		// type: it is classic. (Going to classic, the old one is quorum.)
		typeDiffers := strings.Contains(err.Error(), "'x-queue-type'")
		return oldForm, typeDiffers && m.target.QueueType == acemq.Quorum, nil
	}
	return 0, false, fmt.Errorf("acemq: cannot compare queue %s with its new form: %w", name, err)
}

// declare declares spec on a throwaway channel.
func (m *mover) declare(ctx context.Context, spec transport.QueueSpec) (transport.QueueInfo, error) {
	ch, err := m.c.Channel(ctx)
	if err != nil {
		return transport.QueueInfo{}, err
	}
	defer ch.Close()
	return ch.DeclareQueue(ctx, spec)
}

func (m *mover) run(ctx context.Context) error {
	name := m.target.Queue.Name
	f, classic, err := m.state(ctx)
	if err != nil {
		return err
	}
	_, err = m.declare(ctx, transport.QueueSpec{Name: m.hold.Name, Passive: true})
	holding := err == nil
	if err != nil && transport.Code(err) != transport.CodeNotFound {
		return fmt.Errorf("acemq: cannot check queue %s: %w", m.hold.Name, err)
	}
	switch f {
	case oldForm:
		if !classic && !m.o.WritersStopped {
			return fmt.Errorf("acemq: %s is a quorum queue, which RabbitMQ cannot delete only while it is empty, so a dead letter written during the move could be lost; stop every service that writes to it, then run the move again with --writers-stopped", name)
		}
		if err := m.stepOne(ctx, classic); err != nil {
			return err
		}
	case absent:
		if !holding {
			m.logf("%s does not exist: nothing to move (a consumer declares it in its layout when it starts)", name)
			m.rep.Already = true
			return nil
		}
		if err := m.declareTarget(ctx); err != nil {
			return err
		}
	case targetForm:
		if !holding {
			m.rep.Already = true
			m.logf("%s is already in its new form", name)
			return m.bind(ctx)
		}
		if err := m.bind(ctx); err != nil {
			return err
		}
	}
	return m.stepTwo(ctx)
}

// declareTarget declares the queue in its new form and binds it.
func (m *mover) declareTarget(ctx context.Context) error {
	if _, err := m.declare(ctx, m.target.Queue); err != nil {
		return fmt.Errorf("acemq: cannot declare %s in its new form: %w", m.target.Queue.Name, err)
	}
	return m.bind(ctx)
}

func (m *mover) bind(ctx context.Context) error {
	if m.o.Binding == nil {
		return nil
	}
	ch, err := m.c.Channel(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.DeclareExchange(ctx, transport.ExchangeSpec{Name: m.o.Binding.Exchange, Kind: transport.Direct, Durable: true}); err != nil {
		return fmt.Errorf("acemq: cannot declare exchange %s: %w", m.o.Binding.Exchange, err)
	}
	if err := ch.BindQueue(ctx, *m.o.Binding); err != nil {
		return fmt.Errorf("acemq: cannot bind %s to %s: %w", m.o.Binding.Queue, m.o.Binding.Exchange, err)
	}
	return nil
}

// copyRecord is one message of the holding queue, as read.
type copyRecord struct {
	run    string
	seq    int
	stamp  string
	marker string // "commit" or "void" for a marker, "" for a copy
	count  int    // a commit marker's count of copies
}

func record(d transport.Delivery) copyRecord {
	if v, ok := d.Headers[MarkerHeader].(string); ok {
		f := strings.Fields(v)
		r := copyRecord{marker: f[0]}
		if len(f) > 1 {
			r.run = f[1]
		}
		if len(f) > 2 {
			r.count, _ = strconv.Atoi(f[2])
		}
		return r
	}
	var r copyRecord
	if v, ok := d.Headers[StampHeader].(string); ok {
		r.stamp = v
		run, seq, _ := strings.Cut(v, "/")
		r.run = run
		r.seq, _ = strconv.Atoi(seq)
	}
	return r
}

// runs sorts the holding queue's copies into runs: committed or void by
// their markers, and the open ones (neither), in order.
type runs struct {
	committed, void map[string]bool
	order           []string
	copies          map[string]int
}

func sortRuns(content []copyRecord) runs {
	r := runs{committed: map[string]bool{}, void: map[string]bool{}, copies: map[string]int{}}
	for _, c := range content {
		switch c.marker {
		case "commit":
			r.committed[c.run] = true
		case "void":
			r.void[c.run] = true
		case "sentinel":
		default:
			if _, ok := r.copies[c.run]; !ok {
				r.order = append(r.order, c.run)
			}
			r.copies[c.run]++
		}
	}
	return r
}

// holdingContent reads the holding queue without taking anything (its
// messages go back, in place, when the reading channel closes), keeping
// each message's record, not its body.
func (m *mover) holdingContent(ctx context.Context) ([]copyRecord, error) {
	var out []copyRecord
	_, err := browse(ctx, m.c, m.hold.Name, func(d transport.Delivery) { out = append(out, record(d)) })
	return out, err
}

// waitUnheld waits until queue has no subscriber: a mover that was
// killed held its messages on a subscription, and they are back in
// place once the broker has dropped it.
func (m *mover) waitUnheld(ctx context.Context, queue string) error {
	told := false
	for {
		info, err := m.declare(ctx, transport.QueueSpec{Name: queue, Passive: true})
		if err != nil {
			if transport.Code(err) == transport.CodeNotFound {
				return nil
			}
			return fmt.Errorf("acemq: cannot check queue %s: %w", queue, err)
		}
		if info.Consumers == 0 {
			return nil
		}
		if !told {
			m.logf("%s has %d subscriber(s) (an earlier move not yet gone, a console or a tool reading it); waiting for them to go", queue, info.Consumers)
			told = true
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// stepOne copies the old queue into the holding queue and deletes it only
// while it is empty, then declares the queue in its new form.
func (m *mover) stepOne(ctx context.Context, classic bool) error {
	name := m.target.Queue.Name
	if _, err := m.declare(ctx, m.hold); err != nil {
		return fmt.Errorf("acemq: cannot declare the holding queue %s: %w", m.hold.Name, err)
	}
	if err := m.waitUnheld(ctx, name); err != nil {
		return err
	}
	if err := m.waitUnheld(ctx, m.hold.Name); err != nil {
		return err
	}
	content, err := m.holdingContent(ctx)
	if err != nil {
		return fmt.Errorf("acemq: cannot read the holding queue %s: %w", m.hold.Name, err)
	}
	rs := sortRuns(content)

	// The lock: an exclusive subscription with a prefetch of one.
	lock, err := m.c.Channel(ctx)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := lock.Qos(1); err != nil {
		return err
	}
	lockDs, err := lock.Consume(ctx, transport.ConsumeSpec{Queue: name, Tag: "acemq-migrate-lock-" + newRun(), Exclusive: true})
	if err != nil {
		return fmt.Errorf("acemq: cannot take %s for the move (is something subscribed to it? stop it, or close the console's read): %w", name, err)
	}
	run := newRun()
	if err := m.c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: name, ContentType: "text/plain",
		Headers: map[string]any{MarkerHeader: "sentinel " + run}, Body: []byte("sentinel " + run + " of acemq dlq migrate")}); err != nil {
		return fmt.Errorf("acemq: cannot mark %s for the move: %w", name, err)
	}
	// The queue holds at least the sentinel, so the lock's one delivery
	// comes; after it nothing more is on its way to the lock.
	var first transport.Delivery
	select {
	case d, ok := <-lockDs:
		if !ok {
			return fmt.Errorf("acemq: the subscription to %s ended at once; run the move again", name)
		}
		first = d
	case <-ctx.Done():
		return ctx.Err()
	}

	// Everything else, with basic.get, held on the broker: each message is
	// copied as soon as a batch of them is read, and only its delivery tag
	// stays here, so the mover's memory is one batch whatever the queue
	// holds.
	ch, err := m.c.Channel(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	sentinels := map[string]bool{}
	seq := 0
	pending := make([]transport.Delivery, 0, m.o.Batch)
	copyOut := func() error {
		if len(pending) == 0 {
			return nil
		}
		msgs := make([]acemq.RawMessage, len(pending))
		for i, d := range pending {
			seq++
			msgs[i] = rawCopy(d, m.hold.Name, run+"/"+strconv.Itoa(seq))
		}
		for i, err := range m.c.PublishRawBatch(ctx, msgs) {
			if err != nil {
				return fmt.Errorf("acemq: copying message %d of the batch to %s failed, so nothing of %s is deleted (run the move again): %w", i+1, m.hold.Name, name, err)
			}
		}
		m.rep.Copied += len(pending)
		clear(pending) // the bodies go; the originals stay held by the broker
		pending = pending[:0]
		m.logf("copied %d of %s to %s", m.rep.Copied, name, m.hold.Name)
		return nil
	}
	keep := func(d transport.Delivery) error {
		if r := record(d); r.marker == "sentinel" {
			sentinels[r.run] = true
			return nil
		}
		pending = append(pending, d)
		if len(pending) >= m.o.Batch {
			return copyOut()
		}
		return nil
	}
	drain := func() error {
		for {
			d, ok, err := ch.Get(ctx, name)
			if err != nil {
				return fmt.Errorf("acemq: cannot read %s: %w", name, err)
			}
			if !ok {
				return copyOut()
			}
			if err := keep(d); err != nil {
				return err
			}
		}
	}
	if err := keep(first); err != nil {
		return err
	}
	if err := drain(); err != nil {
		return err
	}

	// A run neither committed nor void is one a kill interrupted: if its
	// sentinel is in the old queue, its delete never happened and its
	// copies are of what the old queue still holds. (This run's copies are
	// in the holding queue already: a kill from here on leaves them open
	// with this run's sentinel in the old queue, and the next run voids
	// them too.)
	for _, r := range rs.order {
		if rs.committed[r] || rs.void[r] {
			continue
		}
		if sentinels[r] {
			if err := m.marker(ctx, "void", r, 0); err != nil {
				return err
			}
			m.rep.Voided += rs.copies[r]
			m.logf("%d copies of an interrupted run (%s) are of messages still in %s: voided", rs.copies[r], r, name)
			continue
		}
		if err := m.marker(ctx, "commit", r, rs.copies[r]); err != nil {
			return err
		}
		m.logf("%d copies of an earlier run (%s) are the only ones left (%s was deleted and declared again since): kept", rs.copies[r], r, name)
	}

	for {
		// Every message is copied and held here: delete the old queue,
		// only if nothing arrived since and nobody else holds one.
		info, err := m.declare(ctx, transport.QueueSpec{Name: name, Passive: true})
		if err != nil {
			return err
		}
		if info.Messages == 0 && info.Consumers <= 1 {
			m.logf("deleting the old %s if it is still empty", name)
			err = m.deleteOld(ctx, classic)
			if err == nil {
				break
			}
			if transport.Code(err) != transport.CodePreconditionFailed {
				return fmt.Errorf("acemq: cannot delete the old %s (its messages are all in %s; run the move again): %w", name, m.hold.Name, err)
			}
			m.logf("%s received a message during the move; copying it too", name)
		} else if info.Consumers > 1 {
			m.logf("%s has another subscriber; waiting for it to go before deleting it", name)
			if err := sleep(ctx, 500*time.Millisecond); err != nil {
				return err
			}
		}
		if err := drain(); err != nil {
			return err
		}
	}
	m.logf("deleted the old %s; every message of it is in %s", name, m.hold.Name)
	if err := m.declareTarget(ctx); err != nil {
		return err
	}
	return m.marker(ctx, "commit", run, seq)
}

// sleep waits d or until ctx ends: the mover's pause before it looks
// again at a queue someone else is reading.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// deleteOld deletes the old queue only while it holds no ready message;
// a quorum queue cannot be, and is deleted outright (its writers are
// stopped: Options.WritersStopped).
func (m *mover) deleteOld(ctx context.Context, classic bool) error {
	name := m.target.Queue.Name
	ch, err := m.c.Channel(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	if !classic {
		_, err = ch.DeleteQueue(ctx, name)
		return err
	}
	d, ok := ch.(transport.EmptyDeleter)
	if !ok {
		return errors.New("this transport cannot delete a queue only if it is empty")
	}
	_, err = d.DeleteQueueIfEmpty(ctx, name)
	return err
}

// marker writes a marker for run (with its count of copies) to the
// holding queue, confirmed.
func (m *mover) marker(ctx context.Context, kind, run string, count int) error {
	v := fmt.Sprintf("%s %s %d", kind, run, count)
	err := m.c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: m.hold.Name, ContentType: "text/plain",
		Headers: map[string]any{MarkerHeader: v}, Body: []byte(v)})
	if err != nil {
		return fmt.Errorf("acemq: cannot write the %s marker to %s (run the move again): %w", kind, m.hold.Name, err)
	}
	return nil
}

// stepTwo moves every copy that is not void from the holding queue to
// the queue in its new form, skipping those it holds already, and then
// deletes the holding queue.
func (m *mover) stepTwo(ctx context.Context) error {
	name := m.target.Queue.Name
	if err := m.waitUnheld(ctx, m.hold.Name); err != nil {
		return err
	}
	content, err := m.holdingContent(ctx)
	if err != nil {
		return fmt.Errorf("acemq: cannot read the holding queue %s: %w", m.hold.Name, err)
	}
	// The old queue is gone: a run without a marker deleted it (its kill
	// came before the commit marker), so its copies count.
	rs := sortRuns(content)
	there := map[string]bool{}
	if len(content) > 0 {
		_, err := browse(ctx, m.c, name, func(d transport.Delivery) {
			if s, ok := d.Headers[StampHeader].(string); ok {
				there[s] = true
			}
		})
		if err != nil {
			return fmt.Errorf("acemq: cannot read %s for the copies it holds already: %w", name, err)
		}
	}
	ch, err := m.c.Channel(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Qos(m.o.Batch); err != nil {
		return err
	}
	ds, err := ch.Consume(ctx, transport.ConsumeSpec{Queue: m.hold.Name, Tag: "acemq-migrate-" + newRun(), Exclusive: true})
	if err != nil {
		return fmt.Errorf("acemq: cannot take %s: %w", m.hold.Name, err)
	}
	left := len(content)
	for left > 0 {
		var batch []transport.Delivery
		for len(batch) < m.o.Batch && len(batch) < left {
			select {
			case d, ok := <-ds:
				if !ok {
					return fmt.Errorf("acemq: the subscription to %s ended during the move; run the move again", m.hold.Name)
				}
				batch = append(batch, d)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var msgs []acemq.RawMessage
		for _, d := range batch {
			r := record(d)
			stamp, _ := d.Headers[StampHeader].(string)
			switch {
			case r.marker != "", rs.void[r.run], stamp == "":
			case there[stamp]:
				m.rep.Skipped++
			default:
				msgs = append(msgs, rawCopy(d, name, stamp))
			}
		}
		for i, err := range m.c.PublishRawBatch(ctx, msgs) {
			if err != nil {
				return fmt.Errorf("acemq: moving message %d of the batch to %s failed (run the move again): %w", i+1, name, err)
			}
		}
		m.rep.Moved += len(msgs)
		for _, d := range batch {
			if err := ch.Ack(d.DeliveryTag); err != nil {
				return fmt.Errorf("acemq: cannot acknowledge a moved message on %s (run the move again): %w", m.hold.Name, err)
			}
		}
		left -= len(batch)
		m.logf("moved %d to %s (%d already there)", m.rep.Moved, name, m.rep.Skipped)
	}
	// Every message the holding queue held is moved, skipped or void, and
	// nothing but the mover writes to it: delete it, with whatever acks
	// are still on their way.
	if info, err := m.declare(ctx, transport.QueueSpec{Name: m.hold.Name, Passive: true}); err == nil && info.Messages > 0 {
		return fmt.Errorf("acemq: %s holds %d more messages than it did when the move began; run the move again", m.hold.Name, info.Messages)
	}
	if _, err := ch.DeleteQueue(ctx, m.hold.Name); err != nil {
		return fmt.Errorf("acemq: cannot delete the holding queue %s (everything is moved; delete it by hand): %w", m.hold.Name, err)
	}
	m.logf("%s is in its new form; deleted %s", name, m.hold.Name)
	return nil
}

// rawCopy is d as a message to queue, its bytes, properties and headers
// unchanged but for the broker's delivery counts, with the stamp.
func rawCopy(d transport.Delivery, queue, stamp string) acemq.RawMessage {
	h := make(map[string]any, len(d.Headers)+1)
	for k, v := range d.Headers {
		if !deliveryCount(k) {
			h[k] = v
		}
	}
	if stamp != "" {
		h[StampHeader] = stamp
	}
	return acemq.RawMessage{RoutingKey: queue, ContentType: d.ContentType, MessageID: d.MessageID, ReplyTo: d.ReplyTo,
		Headers: h, Body: d.Body, Priority: d.Priority, Transient: d.DeliveryMode == 1}
}

// deliveryCount names the headers a quorum queue adds on delivery.
func deliveryCount(k string) bool { return k == "x-delivery-count" || k == "x-acquired-count" }

func newRun() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// browse hands every message of queue to fn, on a channel of its own
// that it then closes, which hands them all back in place (a classic
// queue, and a quorum queue without a delivery limit, keep their order;
// the replicated layout's queues have none). It stops once the queue's
// count is read, and returns that count. fn must not keep a delivery's
// body: only what fn keeps stays in memory, so a reader that keeps a
// header costs that header per message. The broker takes the messages
// back asynchronously, so it waits (up to ten seconds) until the queue
// counts them again and its subscription is gone, as replay.Browse does.
func browse(ctx context.Context, c *acemq.Conn, queue string, fn func(transport.Delivery)) (int, error) {
	ch, err := c.Channel(ctx)
	if err != nil {
		return 0, err
	}
	n, err := take(ctx, ch, queue, fn)
	_ = ch.Close()
	if err != nil || n == 0 {
		return n, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		pc, err := c.Channel(ctx)
		if err != nil {
			return n, nil
		}
		info, err := pc.DeclareQueue(ctx, transport.QueueSpec{Name: queue, Passive: true})
		_ = pc.Close()
		if err != nil || (info.Messages >= n && info.Consumers == 0) {
			return n, nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return n, err
		}
	}
	return n, nil
}

// take subscribes to queue on ch and hands fn as many messages as it
// counted. Every one stays unacknowledged until ch closes, so the
// subscription cannot have a prefetch limit; the deliveries are handed on
// as they come and none is kept here.
func take(ctx context.Context, ch transport.Channel, queue string, fn func(transport.Delivery)) (int, error) {
	info, err := ch.DeclareQueue(ctx, transport.QueueSpec{Name: queue, Passive: true})
	if err != nil {
		if transport.Code(err) == transport.CodeNotFound {
			return 0, nil
		}
		return 0, err
	}
	if info.Messages == 0 {
		return 0, nil
	}
	if err := ch.Qos(0); err != nil {
		return 0, err
	}
	ds, err := ch.Consume(ctx, transport.ConsumeSpec{Queue: queue, Tag: "acemq-migrate-read-" + newRun(), ReadOnlyHeaders: true})
	if err != nil {
		return 0, err
	}
	for n := 0; n < info.Messages; n++ {
		select {
		case d, ok := <-ds:
			if !ok {
				return n, fmt.Errorf("the read of %s ended after %d of %d messages", queue, n, info.Messages)
			}
			fn(d)
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
	return info.Messages, nil
}
