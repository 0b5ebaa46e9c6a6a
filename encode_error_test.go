package acemq_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// An encode failure is reported once, with one "acemq: " prefix, and says
// the message was not sent.
func TestEncodeFailureSaysSoOnceAndSendsNothing(t *testing.T) {
	ctx := context.Background()
	name := "encode-" + t.Name()
	defer memory.Delete(name)
	c, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	_, err = c.Publish(ctx, "", "q", "not bytes", acemq.SendOptions{Codec: acemq.Bytes()})
	if err == nil {
		t.Fatal("a string sent with the bytes codec was accepted")
	}
	var pe *acemq.PublishError
	if !errors.As(err, &pe) || pe.Sent || pe.Outcome != acemq.OutcomeFailed || acemq.IsPaused(err) {
		t.Fatalf("encode failure %+v, want failed and not sent", pe)
	}
	if n := strings.Count(err.Error(), "acemq: "); n != 1 {
		t.Fatalf("%q carries the acemq: prefix %d times", err, n)
	}
	if !strings.Contains(err.Error(), "the payload could not be encoded: ") {
		t.Fatalf("%q does not say the payload could not be encoded", err)
	}
}
