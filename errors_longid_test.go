package acemq_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
)

// readableLine is the most a line naming a long id may take: the sentence,
// the id's first 64 bytes and its length, with room to spare.
const readableLine = 1024

// checkShown fails unless s names id readably: its start and its length,
// and not the whole of it.
func checkShown(t *testing.T, what, s, id string) {
	t.Helper()
	if len(s) > readableLine {
		t.Errorf("%s is %d bytes for an id of %d; want under %d: %.200q…", what, len(s), len(id), readableLine, s)
	}
	if !strings.Contains(s, id[:64]) || !strings.Contains(s, "("+itoa(int64(len(id)))+" bytes)") {
		t.Errorf("%s does not name the id by its first 64 bytes and its length: %.300q", what, s)
	}
}

// A publisher may send an id of 60,000 bytes (x-acemq-id is a long
// string). Printed whole, every error and log line naming it was 60 KB;
// they show the id's first 64 bytes and its length instead, and the
// error's fields keep the id whole.
func TestALongIDIsShortenedInErrorStringsAndKeptWholeInTheFields(t *testing.T) {
	id := longID(60000)
	pe := &acemq.PublishError{MessageID: id, Exchange: "orders", RoutingKey: "new", Reason: "the broker refused to confirm it", Sent: true, Nacked: true, Outcome: acemq.OutcomeFailed}
	unroutable := &acemq.PublishError{MessageID: id, Exchange: "orders", RoutingKey: "new", Reason: "no queue is bound", Unroutable: true, ReplyCode: 312, Outcome: acemq.OutcomeUnroutable}
	paused := &acemq.PublishingPausedError{PublishError: acemq.PublishError{MessageID: id, Reason: "the broker has blocked this connection", Outcome: acemq.OutcomeRefused}}
	batch := &acemq.BatchPublishError{Total: 2, Confirmed: 1, Failed: 1, First: pe, Results: []acemq.Result{{}, {Err: pe}}}
	for _, tc := range []struct {
		name string
		err  error
	}{{"PublishError", pe}, {"unroutable PublishError", unroutable}, {"PublishingPausedError", paused}, {"BatchPublishError", batch}} {
		checkShown(t, tc.name+".Error()", tc.err.Error(), id)
		var got *acemq.PublishError
		if !errors.As(tc.err, &got) || got.MessageID != id {
			t.Errorf("%s: errors.As gives a MessageID of %d bytes, want the whole %d", tc.name, len(got.MessageID), len(id))
		}
	}
	short := &acemq.PublishError{MessageID: "0193a5c0-7f3e-7cc1-9d2f-6b1e1c9a4f00", Exchange: "orders", RoutingKey: "new", Reason: "x"}
	if want := `acemq: cannot publish message 0193a5c0-7f3e-7cc1-9d2f-6b1e1c9a4f00 to exchange "orders" with key "new": x`; short.Error() != want {
		t.Errorf("a short id's error is %q, want %q", short.Error(), want)
	}
}

// A handler that panics on a message with a 60,000-byte id: the log lines
// (the panic, the set-aside) and the reason the copy carries name the id
// readably; the copy keeps it whole.
func TestALongIDIsShortenedInLogLinesAndTheSetAsideReason(t *testing.T) {
	var logs lockedBuffer
	cfg := acemq.Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	onEveryFrameWriter(t, func(t *testing.T, r *rig) {
		logs.Reset()
		q := r.named("longid.log")
		if err := r.c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Quorum})); err != nil {
			t.Fatal(err)
		}
		id := longID(60000)
		consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			panic("boom")
		}, acemq.ConsumerConfig{Retry: acemq.NoRetry()})
		publishWithID(r, q, id, `{"id":"long"}`)
		c := r.pull(q + ".dlq")
		if c.Envelope.ID != id {
			t.Fatalf("the copy in %s.dlq has an id of %d bytes, want the whole %d", q, len(c.Envelope.ID), len(id))
		}
		checkShown(t, "the copy's x-acemq-error", c.Envelope.Error, id)
		named := 0
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			if strings.Contains(line, id[:64]) {
				named++
				// The panic's line ends with its stack trace, which is
				// long whatever the id.
				line, _, _ = strings.Cut(line, " stack=")
				checkShown(t, "the log line", line, id)
			}
		}
		if named == 0 {
			t.Errorf("no log line names the message; logged:\n%.2000s", logs.String())
		}
	}, cfg)
}
