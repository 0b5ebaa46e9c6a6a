package acemq

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// refusingChannel is an open channel whose Ack, Nack and Reject fail.
type refusingChannel struct {
	transport.Channel
	done chan struct{}
}

func (c refusingChannel) Done() <-chan struct{}     { return c.done }
func (c refusingChannel) Ack(uint64) error          { return errors.New("ack refused") }
func (c refusingChannel) Nack(uint64, bool) error   { return errors.New("nack refused") }
func (c refusingChannel) Reject(uint64, bool) error { return errors.New("reject refused") }
func (c refusingChannel) Close() error              { return nil }

// A hand-back or Reject that does not reach the broker is logged as an
// Ack that does not is, with the queue and the error: they were dropped
// silently.
func TestHandBackAndRejectErrorsAreLoggedAsAckErrorsAre(t *testing.T) {
	var buf bytes.Buffer
	cfg := defaultConfig()
	env := consumerEnv{
		logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		tel:    newTelemetry(&cfg, "memory"), recoveryInterval: time.Millisecond, recoveryMax: time.Millisecond,
	}
	k := newConsumerCore(&fakeHost{}, env, "q", "tag-1", 4, 1, cfg.retry, nil, time.Second, nil)
	t.Cleanup(k.stopWorkers)
	att := &attachment{ch: refusingChannel{done: make(chan struct{})}}
	for _, settle := range []struct {
		name string
		fn   func(dv *delivery)
	}{
		{"ack refused", k.ack},
		{"reject refused", k.handBack}, // a basic.reject with requeue
		{"reject refused", k.reject},
	} {
		buf.Reset()
		att.held.Add(1)
		settle.fn(&delivery{att: att, d: transport.Delivery{DeliveryTag: 7}})
		line := buf.String()
		if !strings.Contains(line, settle.name) || !strings.Contains(line, "queue=q") || !strings.Contains(line, "did not reach the broker") {
			t.Errorf("%s: logged %q; want the queue, the error and what happens next", settle.name, line)
		}
	}
}
