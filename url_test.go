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

func TestTheTransportReadsItsOwnURL(t *testing.T) {
	ctx := context.Background()
	name := "url-flags-" + itoa(brokerSeq.Add(1))
	defer memory.Delete(name)
	c, err := acemq.Connect(ctx, "memory://"+name+"?confirms=off", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("q", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	s, err := acemq.NewPublisher[order](c, "", "q", acemq.PublisherConfig{}).Send(ctx, order{})
	if err != nil || s.Outcome != acemq.OutcomePublished {
		t.Fatalf("Send on memory://…?confirms=off = %q, %v; want published (confirms off)", s.Outcome, err)
	}
	_, err = acemq.Connect(ctx, "memory://"+name+"?bogus=1", acemq.Config{})
	var ce *acemq.ConfigurationError
	if !errors.As(err, &ce) || ce.Option != "url" || !strings.Contains(err.Error(), `unknown URL parameter "bogus"`) {
		t.Fatalf("Connect with an unknown memory:// parameter = %v, want the transport's refusal as a url ConfigurationError", err)
	}
}

// A URL the transport refuses is named in the error without its password,
// however it is written: a password holding "/" made url.Parse read the
// user as the host and the password as a port and path, and the old
// redaction then showed the URL as it was.
func TestConnectRefusalsNeverShowThePassword(t *testing.T) {
	for _, raw := range []string{
		"amqp://user:12/secret@host/?frames=bogus",
		"amqp://user:pa ss@host/?frames=bogus",
		"amqp://user:p%zz@host",
		"amqps://user:p@ss/word@host/?coalesce=maybe",
	} {
		_, err := acemq.Connect(context.Background(), raw, acemq.Config{})
		if err == nil {
			t.Fatalf("Connect(%q) succeeded", raw)
		}
		for _, pw := range []string{"12/secret", "secret", "pa ss", "p%zz", "p@ss/word"} {
			if strings.Contains(raw, pw) && strings.Contains(err.Error(), pw) {
				t.Errorf("Connect(%q): %v shows the password", raw, err)
			}
		}
	}
}
