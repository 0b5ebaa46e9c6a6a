package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

// Concurrent Sends, SendAlls and a consumer whose in-consumer retries
// publish hops, all on one Conn: on RabbitMQ their writes are gathered
// under holds (transport.Holder) on the one publishing connection while the
// consumer acks on its own. Every publish is confirmed and every message
// is handled once it is through its retry: nothing is left in a buffer
// behind a writer that went on to wait. Run with -race.
func TestConcurrentSendsSendAllsAndRetryHopsAllArriveUnderHeldWrites(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("held")
		r.queue(q)
		const senders, perSender = 8, 40
		const batchers, rounds, batch = 2, 5, 30
		total := senders*perSender + batchers*rounds*batch

		var mu sync.Mutex
		handled := map[string]int{}
		done := make(chan struct{})
		consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			// Every tenth message is retried once: a hop on the
			// publishing connection beside the application's writes.
			if m.Envelope.Attempt == 1 && len(m.Payload.ID) > 0 && m.Payload.ID[len(m.Payload.ID)-1] == '0' {
				return acemq.Retry(errors.New("once"))
			}
			mu.Lock()
			defer mu.Unlock()
			handled[m.Payload.ID]++
			if len(handled) == total {
				select {
				case <-done:
				default:
					close(done)
				}
			}
			return acemq.Accept()
		}, acemq.ConsumerConfig{Retry: acemq.Exponential(3, time.Millisecond, 0)})

		pub := acemq.NewPublisher[order](r.c, "", q, acemq.PublisherConfig{})
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		errs := make(chan error, senders+batchers)
		var wg sync.WaitGroup
		for s := 0; s < senders; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < perSender; i++ {
					if _, err := pub.Send(ctx, order{ID: fmt.Sprintf("s%d-%d", s, i)}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		for b := 0; b < batchers; b++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := 0; round < rounds; round++ {
					payloads := make([]order, batch)
					for i := range payloads {
						payloads[i] = order{ID: fmt.Sprintf("b%d-%d-%d", b, round, i)}
					}
					sents, err := pub.SendAll(ctx, payloads)
					if err != nil {
						errs <- err
						return
					}
					for i, s := range sents {
						if s.Outcome != acemq.OutcomeConfirmed {
							errs <- fmt.Errorf("member %d of a SendAll: outcome %s", i, s.Outcome)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(waitLimit):
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("%d of %d messages handled within %v", len(handled), total, waitLimit)
		}
		mu.Lock()
		defer mu.Unlock()
		for id, n := range handled {
			if n != 1 {
				t.Fatalf("message %s handled %d times", id, n)
			}
		}
	})
}
