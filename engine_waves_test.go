package acemq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
)

// The README's "pipelined, in waves under the ceiling" and behaviour §2.10,
// observed at the transport seam rather than inferred: a SendAll of ten
// times the outstanding ceiling writes its members in payload order, never
// has more than the ceiling written and unanswered (and does fill it: the
// waves are pipelined, not one by one), and answers in payload order. A
// middle wave whose members the broker refuses is reported member by
// member, the later waves still go out, and the error is the contract's
// batch sentence naming the first failure in payload order.
//
// The refusal: on memory:// the broker's fault injection (NackNext) for
// the failing members; on RabbitMQ the seam sends them to a queue that
// refuses every publish (x-max-length 0, reject-publish), which the broker
// answers with a nack.
func TestSendAllWritesInWavesUnderTheCeilingAndReportsAFailedMiddleWaveMemberByMember(t *testing.T) {
	const ceiling = 10
	const n = 10 * ceiling
	failing := map[int]bool{43: true, 44: true, 47: true} // in the fifth of ten waves
	for _, rabbit := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "rabbitmq"}[rabbit], func(t *testing.T) {
			ctx := context.Background()
			s := &seam{release: ceiling}
			r := seamRig(t, rabbit, s, acemq.Config{MaxOutstandingPublishes: ceiling})
			q := r.named("waves")
			r.queue(q)
			refusing := r.named("waves-refusing")
			if rabbit {
				args := map[string]any{"x-max-length": int64(0), "x-overflow": "reject-publish"}
				if err := r.c.Apply(ctx, acemq.NewTopology().Queue(refusing, acemq.QueueOptions{Type: acemq.Classic, Args: args})); err != nil {
					t.Fatal(err)
				}
			}
			s.fault = func(seq int, m *transport.Message) *transport.Message {
				if !failing[seq] {
					return m
				}
				if !rabbit {
					r.broker.NackNext(1) // this publish, the next the broker takes
					return m
				}
				c := *m
				c.RoutingKey = refusing
				return &c
			}

			payloads := make([]item, n)
			for i := range payloads {
				payloads[i] = item{N: i}
			}
			sents, err := acemq.NewPublisher[item](r.c, "", q, acemq.PublisherConfig{}).SendAll(ctx, payloads)

			// On the wire, in payload order; never more than the ceiling
			// unanswered, and the ceiling reached.
			written := s.writes()
			if len(written) != n {
				t.Fatalf("%d publishes reached the transport, want %d", len(written), n)
			}
			for i, m := range written {
				var got item
				if err := json.Unmarshal(m.Body, &got); err != nil || got.N != i {
					t.Fatalf("write %d carried %s (%v), want payload %d: the batch did not go out in payload order", i, m.Body, err, i)
				}
			}
			if most := s.most(); most != ceiling {
				t.Fatalf("at most %d publishes were outstanding at once, want exactly the ceiling %d (more breaks the ceiling; fewer is not pipelined)", most, ceiling)
			}

			// Answered member by member, in payload order.
			var be *acemq.BatchPublishError
			if !errors.As(err, &be) {
				t.Fatalf("SendAll = %v, want a *BatchPublishError", err)
			}
			if be.Total != n || be.Failed != len(failing) || be.Confirmed != n-len(failing) || len(be.Results) != n || len(sents) != n {
				t.Fatalf("total %d, failed %d, confirmed %d, %d results, %d sents; want %d, %d, %d, %d, %d",
					be.Total, be.Failed, be.Confirmed, len(be.Results), len(sents), n, len(failing), n-len(failing), n, n)
			}
			if be.AllPaused || be.AllUnroutable {
				t.Errorf("AllPaused %v, AllUnroutable %v; want neither for nacks", be.AllPaused, be.AllUnroutable)
			}
			for i, res := range be.Results {
				id := written[i].MessageID
				if failing[i] {
					var pe *acemq.PublishError
					if !errors.As(res.Err, &pe) || pe.MessageID != id || !pe.Nacked || !pe.Sent || pe.Outcome != acemq.OutcomeFailed {
						t.Errorf("member %d: %v (%+v), want a nacked, failed PublishError for %s", i, res.Err, pe, id)
					}
					if sents[i].Envelope.ID != "" {
						t.Errorf("member %d failed, but its Sent names %s", i, sents[i].Envelope.ID)
					}
					continue
				}
				if res.Err != nil || res.Sent.Envelope.ID != id || sents[i].Envelope.ID != id || res.Sent.Outcome != acemq.OutcomeConfirmed {
					t.Errorf("member %d: %+v, %v; want confirmed with id %s", i, res.Sent, res.Err, id)
				}
			}
			first := written[43].MessageID
			want := fmt.Sprintf("%d of %d messages were not confirmed; %d were. The first failure was: ", len(failing), n, n-len(failing))
			var pe *acemq.PublishError
			if !errors.As(be.First, &pe) || pe.MessageID != first || err.Error() != want+be.First.Error() {
				t.Errorf("error %q, first %v; want %q followed by member 43's (%s) failure", err, be.First, want, first)
			}
			if got := r.ready(q); got != n-len(failing) {
				t.Errorf("%s holds %d, want the %d confirmed", q, got, n-len(failing))
			}
		})
	}
}
