package memory

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/acemq-go/acemq/transport"
)

func TestFrameMaxAndMaxMessageSizeAreURLSettings(t *testing.T) {
	for _, u := range []string{"memory://x?frame_max=4095", "memory://x?frame_max=big", "memory://x?max_message_size=0"} {
		if _, err := (Driver{}).CheckURL(u); err == nil || !strings.Contains(err.Error(), "give a whole number of bytes") {
			t.Errorf("CheckURL(%q) = %v, want the refusal saying what to give", u, err)
		}
	}
	_, name := newTestBroker(t)
	c, _, err := (Driver{}).Dial(context.Background(), transport.Config{URL: "memory://" + name + "?frame_max=5000"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	p, err := c.Publisher(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	msg := &transport.Message{RoutingKey: "q", Properties: transport.Properties{Headers: transport.Table{"x": strings.Repeat("x", 5000)}}}
	var le *transport.LimitError
	if err := p.Publish(context.Background(), msg, func(transport.Confirmation) {}); !errors.As(err, &le) || le.Max != 5000 || !errors.Is(err, transport.ErrNotWritten) {
		t.Fatalf("Publish of a 5000-byte header at frame_max=5000 = %v, want a not-written LimitError for 5000", err)
	}
	select {
	case <-p.Done():
		t.Fatal("the refusal closed the channel")
	default:
	}
}

// The broker's own max_message_size (RabbitMQ 4's 16 MiB unless set)
// closes the publishing channel with 406, in RabbitMQ's words.
func TestABodyOverTheBrokersMaxMessageSizeClosesTheChannelWith406(t *testing.T) {
	_, name := newTestBroker(t)
	c, _, err := (Driver{}).Dial(context.Background(), transport.Config{URL: "memory://" + name + "?max_message_size=10"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	p, err := c.Publisher(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan transport.Confirmation, 1)
	err = p.Publish(context.Background(), &transport.Message{RoutingKey: "q", Body: make([]byte, 11)}, func(cf transport.Confirmation) { got <- cf })
	if transport.Code(err) != transport.CodePreconditionFailed || !strings.Contains(err.Error(), "PRECONDITION_FAILED - message size 11 is larger than configured max size 10") {
		t.Fatalf("Publish = %v, want 406 PRECONDITION_FAILED naming size and limit", err)
	}
	if cf := <-got; cf.Outcome != transport.Lost || transport.Code(cf.Err) != transport.CodePreconditionFailed {
		t.Fatalf("confirmation %+v, want lost with the 406", cf)
	}
	<-p.Done()
}
