package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/acemq-go/acemq/internal/alarmtest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

// prefix is the contract's "cannot publish" prefix for one message to q on
// the default exchange.
func prefix(id, q string) string {
	return fmt.Sprintf("acemq: cannot publish message %s to exchange \"\" with key %s: ", id, strconv.Quote(q))
}

// envelopes returns n envelopes with known ids.
func envelopes(n int) []acemq.Envelope {
	out := make([]acemq.Envelope, n)
	for i := range out {
		out[i] = acemq.NewEnvelope()
	}
	return out
}

func TestSendAllPartialNackReportsExactCountsInPayloadOrder(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.nackingQueue(q, 10, 2)
		envs := envelopes(10)
		payloads := make([]order, 10)
		for i := range payloads {
			payloads[i] = order{ID: strconv.Itoa(i)}
		}
		_, err := acemq.NewPublisher[order](r.c, "", q, acemq.PublisherConfig{}).SendAllWith(context.Background(), payloads, acemq.SendOptions{Envelopes: envs})
		var be *acemq.BatchPublishError
		if !errors.As(err, &be) {
			t.Fatalf("SendAll = %v, want a *BatchPublishError", err)
		}
		if be.Total != 10 || be.Failed != 2 || be.Confirmed != 8 || len(be.Results) != 10 {
			t.Fatalf("total %d failed %d confirmed %d results %d; want 10, 2, 8, 10", be.Total, be.Failed, be.Confirmed, len(be.Results))
		}
		first := -1
		for i, res := range be.Results {
			if res.Err == nil {
				if res.Sent.Envelope.ID != envs[i].ID || res.Sent.Outcome != acemq.OutcomeConfirmed {
					t.Fatalf("result %d: id %s outcome %q, want %s confirmed", i, res.Sent.Envelope.ID, res.Sent.Outcome, envs[i].ID)
				}
				continue
			}
			var pe *acemq.PublishError
			if !errors.As(res.Err, &pe) || pe.MessageID != envs[i].ID || !pe.Sent {
				t.Fatalf("result %d: %v, want a sent PublishError for %s", i, res.Err, envs[i].ID)
			}
			want := prefix(envs[i].ID, q) + "the broker refused to confirm it. The message reached the broker and the broker has not taken responsibility for it, so it must be treated as not sent"
			if res.Err.Error() != want {
				t.Fatalf("result %d error\n got %q\nwant %q", i, res.Err, want)
			}
			if first < 0 {
				first = i
			}
		}
		if first < 0 {
			t.Fatal("no result carries an error")
		}
		want := "2 of 10 messages were not confirmed; 8 were. The first failure was: " + be.Results[first].Err.Error()
		if err.Error() != want {
			t.Fatalf("batch error\n got %q\nwant %q", err, want)
		}
		if acemq.IsPaused(err) || acemq.IsUnroutable(err) {
			t.Fatal("a batch of nacks counts as paused or unroutable")
		}
		r.waitReady(q, 8)
	})
}

// Memory only (as every test here that blocks the Conn): on RabbitMQ a
// block takes a node-wide memory alarm, seconds to raise and clear;
// TestRabbitMemoryAlarmPausesPublishingButNotConsuming covers it there.
func TestSendAllWhileBlockedIsPaused(t *testing.T) {
	r := newRig(t)
	r.queue("q")
	held := alarmtest.BlockAndWait(t, r.c, r.broker, "low on memory")
	_, err := acemq.NewPublisher[order](r.c, "", "q", acemq.PublisherConfig{}).SendAll(context.Background(), []order{{ID: "1"}, {ID: "2"}, {ID: "3"}})
	var be *acemq.BatchPublishError
	if !errors.As(err, &be) || be.Failed != 3 || be.Confirmed != 0 {
		t.Fatalf("SendAll = %v, want 3 of 3 failed", err)
	}
	if !errors.Is(err, acemq.ErrPublishingPaused) || !acemq.IsPaused(err) {
		t.Fatalf("a batch of refusals is not paused: %v", err)
	}
	if got := r.c.Stats(); got.Refused != 3 || got.Failed != 0 {
		t.Fatalf("stats refused %d failed %d; want 3, 0", got.Refused, got.Failed)
	}
	if r.ready("q") != 0 {
		t.Fatal("a refused message reached the queue")
	}
	r.broker.Unblock()
	if err := recv(t, held); err != nil {
		t.Fatalf("the publish held during the alarm, after unblock: %v", err)
	}
	if r.ready("q") != 0 {
		t.Fatal("a refused message reached the queue after unblock")
	}
}

// Memory only: the broker must withhold confirms (StopConfirming), which
// RabbitMQ cannot be told to do.
func TestOutstandingCeilingFailsTheNextPublishWithTheCeilingSentence(t *testing.T) {
	r := newRig(t, acemq.Config{MaxOutstandingPublishes: 2, ConfirmTimeout: 200 * time.Millisecond})
	r.queue("q")
	r.broker.StopConfirming()
	defer r.broker.ResumeConfirming()
	pub := acemq.NewPublisher[order](r.c, "", "q", acemq.PublisherConfig{})
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = pub.Send(context.Background(), order{ID: strconv.Itoa(i)})
		}()
	}
	deadline := time.Now().Add(waitLimit)
	for r.c.Stats().Outstanding != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("outstanding %d, want 2", r.c.Stats().Outstanding)
		}
		time.Sleep(time.Millisecond) // no event for a permit being taken
	}
	env := acemq.NewEnvelope()
	_, err := pub.SendWith(context.Background(), order{ID: "third"}, acemq.SendOptions{Envelope: &env})
	want := prefix(env.ID, "q") + "2 publishes are already waiting for a confirm and none completed within 200ms. The broker is not keeping up; publish more slowly rather than buffering more."
	if err == nil || err.Error() != want {
		t.Fatalf("third Send\n got %v\nwant %q", err, want)
	}
	var pe *acemq.PublishError
	if !errors.As(err, &pe) || pe.Sent || pe.Outcome != acemq.OutcomeFailed {
		t.Fatalf("ceiling error %+v, want failed and not sent", pe)
	}
	if acemq.IsPaused(err) {
		t.Fatal("the ceiling error counts as paused")
	}
	wg.Wait()
	if r.ready("q") != 2 {
		t.Fatalf("q holds %d, want only the two written", r.ready("q"))
	}
}

const reservedSentence = `acemq: header "x-acemq-attempt" is in the reserved "x-acemq-" namespace and would be dropped on consume; use a namespace of your own, such as x-yourcompany-`

// assertReserved checks a reserved-header refusal: the §8.6 sentence,
// a *PublishError that was not sent, and nothing on queue q.
func assertReserved(t *testing.T, r *rig, q string, err error) {
	t.Helper()
	var rh *acemq.ReservedHeaderError
	if !errors.As(err, &rh) || rh.Error() != reservedSentence {
		t.Fatalf("Send = %v, want the reserved-header sentence", err)
	}
	if !strings.HasSuffix(err.Error(), reservedSentence) {
		t.Fatalf("Send error %q does not end with the §8.6 sentence", err)
	}
	var pe *acemq.PublishError
	if !errors.As(err, &pe) || pe.Sent || pe.Outcome != acemq.OutcomeFailed {
		t.Fatalf("reserved header: %+v, want a failed PublishError, not sent", pe)
	}
	if pe.MessageID == "" || strings.Contains(err.Error(), "message  to") {
		t.Fatalf("the refusal names no message id: %q", err)
	}
	if r.ready(q) != 0 {
		t.Fatal("a message with a reserved header was sent")
	}
}

func TestReservedHeaderViaWithHeaderIsRefused(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		_, err := acemq.NewPublisher[order](r.c, "", q, acemq.PublisherConfig{}).SendWith(context.Background(), order{}, acemq.SendOptions{Headers: map[string]any{"x-acemq-attempt": 9}})
		assertReserved(t, r, q, err)
	})
}

func TestReservedHeaderViaPublishInterceptorIsRefused(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		_, err := acemq.NewPublisher[order](r.c, "", q, acemq.PublisherConfig{}).Send(context.Background(), order{})
		assertReserved(t, r, q, err)
	}, acemq.Config{PublishInterceptors: []acemq.PublishInterceptor{func(ctx context.Context, p *acemq.PublishContext) error {
		return p.SetHeader("x-acemq-attempt", 9)
	}}})
}

func TestMandatoryUnroutableReportsTheBrokerText(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		env := acemq.NewEnvelope()
		_, err := acemq.NewPublisher[order](r.c, "", "nowhere", acemq.PublisherConfig{}).SendWith(context.Background(), order{}, acemq.SendOptions{Mandatory: true, Envelope: &env})
		want := fmt.Sprintf("acemq: message %s to exchange \"\" with key \"nowhere\" reached no queue: NO_ROUTE", env.ID)
		if !acemq.IsUnroutable(err) || err.Error() != want {
			t.Fatalf("Send\n got %v\nwant %q", err, want)
		}
		if s := r.c.Stats(); s.Unroutable != 1 || s.Confirmed != 0 {
			t.Fatalf("stats %+v, want one unroutable", s)
		}
	})
}

// Memory only: blocking takes RabbitMQ's node-wide memory alarm (see
// TestSendAllWhileBlockedIsPaused).
func TestPublishWhileBlockedIsRefusedAsPausedWithTheReason(t *testing.T) {
	r := newRig(t)
	r.queue("q")
	notBlockedYet(t, r.c, r.broker)
	held := alarmtest.BlockAndWait(t, r.c, r.broker, "low on memory")
	pub := acemq.NewPublisher[order](r.c, "", "q", acemq.PublisherConfig{})
	env := acemq.NewEnvelope()
	_, err := pub.SendWith(context.Background(), order{}, acemq.SendOptions{Envelope: &env})
	want := prefix(env.ID, "q") + "the broker has blocked this connection; publishing is paused: low on memory. Nothing was sent; back off and retry once the broker unblocks"
	if err == nil || err.Error() != want {
		t.Fatalf("Send\n got %v\nwant %q", err, want)
	}
	var paused *acemq.PublishingPausedError
	var pe *acemq.PublishError
	if !errors.As(err, &paused) || !errors.As(err, &pe) || !errors.Is(err, acemq.ErrPublishingPaused) {
		t.Fatalf("%T: not a PublishingPausedError reachable as *PublishError", err)
	}
	if paused.BrokerReason != "low on memory" || pe.Sent || pe.Outcome != acemq.OutcomeRefused {
		t.Fatalf("paused %+v", paused)
	}
	if s := r.c.Stats(); s.Refused != 1 || s.Failed != 0 {
		t.Fatalf("stats refused %d failed %d; want 1, 0", s.Refused, s.Failed)
	}
	r.broker.Unblock()
	if err := recv(t, held); err != nil {
		t.Fatalf("the publish held during the alarm, after unblock: %v", err)
	}
	if r.c.Blocked() || r.c.Health(context.Background()).BlockedReason != "" {
		t.Fatalf("after unblock: blocked %v reason %q", r.c.Blocked(), r.c.Health(context.Background()).BlockedReason)
	}
	if _, err := pub.Send(context.Background(), order{}); err != nil {
		t.Fatalf("Send after unblock: %v", err)
	}
}

func TestNackIsReportedAsRefusedToConfirm(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.nackingQueue(q, 1, 1)
		env := acemq.NewEnvelope()
		_, err := acemq.NewPublisher[order](r.c, "", q, acemq.PublisherConfig{}).SendWith(context.Background(), order{}, acemq.SendOptions{Envelope: &env})
		want := prefix(env.ID, q) + "the broker refused to confirm it. The message reached the broker and the broker has not taken responsibility for it, so it must be treated as not sent"
		if err == nil || err.Error() != want {
			t.Fatalf("Send\n got %v\nwant %q", err, want)
		}
		var pe *acemq.PublishError
		if !errors.As(err, &pe) || !pe.Sent || acemq.IsPaused(err) || pe.Unroutable || pe.Outcome != acemq.OutcomeFailed {
			t.Fatalf("nack: %+v, want sent, failed, not paused and not unroutable", pe)
		}
		if r.ready(q) != 0 {
			t.Fatal("the nacked message is on the queue")
		}
		if s := r.c.Stats(); s.Failed != 1 {
			t.Fatalf("stats failed %d, want 1", s.Failed)
		}
	})
}

// Memory only: the broker must withhold the confirms of written publishes
// when the connection drops (StopConfirming), which RabbitMQ cannot be
// told to do; TestRabbitLossFailsWaitingPublishesFast and
// TestRabbitForcedCloseEverySuccessIsOnTheQueue cover the loss there.
func TestConnectionDropFailsWaitingPublishesFastThenRefusesUntilRecovered(t *testing.T) {
	events := make(chan acemq.Event, 64)
	r := newRig(t, acemq.Config{RecoveryInterval: 300 * time.Millisecond, RecoveryIntervalMax: 300 * time.Millisecond, OnEvent: func(e acemq.Event) { events <- e }})
	r.queue("q")
	got := make(chan *acemq.Message[order], 10)
	k := consume(r, "q", func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
		got <- m
		return acemq.Accept()
	}, acemq.ConsumerConfig{Tag: "steady-tag"})

	r.broker.StopConfirming()
	pub := acemq.NewPublisher[order](r.c, "", "q", acemq.PublisherConfig{})
	type answer struct {
		err error
		id  string
		at  time.Time
	}
	answers := make(chan answer, 3)
	for i := range 3 {
		env := acemq.NewEnvelope()
		go func() {
			_, err := pub.SendWith(context.Background(), order{ID: strconv.Itoa(i)}, acemq.SendOptions{Envelope: &env})
			answers <- answer{err, env.ID, time.Now()}
		}()
	}
	// A permit is taken before the write, so a permit count does not say
	// the message was written; its delivery to the consumer does (the
	// broker routes it while withholding the confirm).
	for range 3 {
		recv(t, got)
	}
	dropped := time.Now()
	r.broker.DropConnections()
	r.broker.ResumeConfirming()
	for range 3 {
		a := recv(t, answers)
		want := prefix(a.id, "q") + "the connection was lost and remade before the broker confirmed it, so whether it arrived is unknown; publish it again only if a duplicate is acceptable"
		if a.err == nil || a.err.Error() != want {
			t.Fatalf("waiting Send\n got %v\nwant %q", a.err, want)
		}
		var pe *acemq.PublishError
		if !errors.As(a.err, &pe) || !pe.Sent || acemq.IsPaused(a.err) {
			t.Fatalf("lost publish %+v, want sent, not paused", pe)
		}
		if d := a.at.Sub(dropped); d > time.Second {
			t.Fatalf("a waiting publish took %s to fail after the drop", d)
		}
	}
	if e := recv(t, events); e.Kind != acemq.EventLost {
		t.Fatalf("first event %s, want lost", e.Kind)
	}
	env := acemq.NewEnvelope()
	_, err := pub.SendWith(context.Background(), order{ID: "during"}, acemq.SendOptions{Envelope: &env})
	wantLost := prefix(env.ID, "q") + "the connection has been lost and is waiting to be recovered; this message was not sent, and a retry once the recovery completes will go down the recovered connection."
	wantReopen := prefix(env.ID, "q") + "the connection is being recovered and its channels are not open yet. Publishing now would be refused by the broker and would close the connection again; this message was not sent, and a retry once the recovery completes will go down the recovered connection."
	if err == nil || (err.Error() != wantLost && err.Error() != wantReopen) {
		t.Fatalf("Send during recovery\n got %v\nwant %q", err, wantLost)
	}
	if !acemq.IsPaused(err) {
		t.Fatalf("a publish during recovery is not paused: %v", err)
	}
	for e := recv(t, events); e.Kind != acemq.EventRecovered; e = recv(t, events) {
	}
	if st := r.c.State(); st != acemq.StateOpen {
		t.Fatalf("state %s after recovered, want open", st)
	}
	sent, err := pub.Send(context.Background(), order{ID: "after"})
	if err != nil {
		t.Fatalf("Send after recovery: %v", err)
	}
	for m := recv(t, got); m.Envelope.ID != sent.Envelope.ID; m = recv(t, got) {
		// Messages confirmed-or-lost before the drop may arrive first.
	}
	if k.Tag() != "steady-tag" {
		t.Fatalf("tag %q after recovery", k.Tag())
	}
	if info, _ := r.broker.QueueInfo("q"); info.Consumers != 1 {
		t.Fatalf("q has %d consumers after recovery, want 1", info.Consumers)
	}
	if s := r.c.Stats(); s.Refused < 1 {
		t.Fatalf("stats %+v: the refusal during recovery was not counted as refused", s)
	}
}

func TestSendAllSurvivesConfirmsArrivingWhileItIsStillWriting(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		pub := acemq.NewPublisher[order](r.c, "", q, acemq.PublisherConfig{})
		batch := make([]order, 50)
		for round := range 20 {
			sents, err := pub.SendAll(context.Background(), batch)
			if err != nil || len(sents) != len(batch) {
				t.Fatalf("round %d: %d sent, %v", round, len(sents), err)
			}
		}
		r.waitReady(q, 20*len(batch))
	}, acemq.Config{PublishChannels: 1})
}

// Memory only for the test-time budget: on RabbitMQ the drop is a
// rabbitmqctl call (an Erlang VM boots for each, 3-10 s on the shared CI
// machine); the RabbitMQ run passed (9.6 s) when this was written.
// TestRabbitSendAllAcrossForcedClose sends batches across a loss there.
func TestSendAllWaitsForRecoveryLikeSend(t *testing.T) {
	events := make(chan acemq.Event, 64)
	r := newRig(t, acemq.Config{WaitForRecovery: true, RecoveryInterval: 200 * time.Millisecond, RecoveryIntervalMax: 200 * time.Millisecond, OnEvent: func(e acemq.Event) { events <- e }})
	r.queue("q")
	r.broker.DropConnections()
	for e := recv(t, events); e.Kind != acemq.EventLost; e = recv(t, events) {
	}
	if st := r.c.State(); st == acemq.StateOpen {
		t.Fatalf("state %s right after the loss; the test needs a batch sent during the recovery", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	sents, err := acemq.NewPublisher[order](r.c, "", "q", acemq.PublisherConfig{}).SendAll(ctx, []order{{ID: "1"}, {ID: "2"}, {ID: "3"}})
	if err != nil {
		t.Fatalf("SendAll during a recovery with Config.WaitForRecovery = %v, want it to wait and succeed as Send does", err)
	}
	if len(sents) != 3 || sents[2].Outcome != acemq.OutcomeConfirmed {
		t.Fatalf("sents %+v", sents)
	}
	r.waitReady("q", 3)
}

func TestPublishErrorSaysNackedAndTheReplyCodeWithoutReadingText(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.nackingQueue(q, 1, 1)
		_, err := acemq.NewPublisher[order](r.c, "", q, acemq.PublisherConfig{}).Send(context.Background(), order{})
		var pe *acemq.PublishError
		if !errors.As(err, &pe) || !pe.Nacked || pe.Unroutable {
			t.Fatalf("nack: %+v, want Nacked set, not Unroutable", pe)
		}
		_, err = acemq.NewPublisher[order](r.c, "", "nowhere", acemq.PublisherConfig{}).SendWith(context.Background(), order{}, acemq.SendOptions{Mandatory: true})
		if !errors.As(err, &pe) || !pe.Unroutable || pe.ReplyCode != 312 || pe.Nacked {
			t.Fatalf("unroutable: %+v, want Unroutable with the broker's reply code 312 and not Nacked", pe)
		}
	})
}

// A Send whose caller's ctx ends while the confirm is outstanding says the
// caller stopped waiting and wraps the ctx's error, for a deadline as for a
// cancel; only the Conn's own confirm timeout says "did not confirm
// within". Memory only: the broker must withhold confirms. (The batch of
// one once took a ctx deadline for the confirm timeout; the alarm drill
// counted those Sends as errors of no known kind.)
func TestSendWhoseDeadlinePassesBeforeTheConfirmSaysTheCallerStoppedWaiting(t *testing.T) {
	r := newRig(t, acemq.Config{ConfirmTimeout: time.Minute})
	r.queue("q")
	r.broker.StopConfirming()
	defer r.broker.ResumeConfirming()
	pub := acemq.NewPublisher[order](r.c, "", "q", acemq.PublisherConfig{})
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		ctx, cancel := c.ctx()
		_, err := pub.Send(ctx, order{ID: c.name})
		cancel()
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: Send = %v, want an error wrapping %v", c.name, err, c.want)
		}
		if strings.Contains(err.Error(), "did not confirm it within") {
			t.Fatalf("%s: %v reads as the confirm timeout; the caller stopped waiting", c.name, err)
		}
	}
}
