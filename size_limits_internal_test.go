package acemq

import (
	"errors"
	"strings"
	"testing"

	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/transport"
)

// RabbitMQ 4.0 answered a 20 MiB Send with a channel close the library
// read as "whether it arrived is unknown"; the broker refused it, so it
// certainly did not arrive.
func TestTheBrokersMessageSizeRefusalReadsAsNotSent(t *testing.T) {
	for _, text := range []string{
		"PRECONDITION_FAILED - message size 20971528 is larger than configured max size 16777216", // 4.0
		"PRECONDITION_FAILED - message size 20971528 is larger than max size 16777216",            // 3.x at its ceiling
	} {
		msg := &transport.Message{RoutingKey: "q", Body: make([]byte, 20971528)}
		err := classify(msg, transport.Confirmation{Outcome: transport.Lost, Err: &transport.Error{Code: 406, Reason: text, Server: true}})
		var pe *PublishError
		if !errors.Is(err, ErrMessageTooLarge) || !errors.As(err, &pe) || pe.Sent || pe.ReplyCode != 406 || pe.Outcome != OutcomeRefused {
			t.Fatalf("%q: classify = %v, want an unsent refusal matching ErrMessageTooLarge", text, err)
		}
		if !strings.Contains(err.Error(), "nothing was sent") || !strings.Contains(err.Error(), "claimcheck") || strings.Contains(err.Error(), "unknown") {
			t.Fatalf("%q: %q", text, err)
		}
		// A smaller message that was in flight on the same channel: the
		// close says nothing certain about it.
		small := &transport.Message{RoutingKey: "q", Body: []byte("x")}
		err = classify(small, transport.Confirmation{Outcome: transport.Lost, Err: &transport.Error{Code: 406, Reason: text, Server: true}})
		if errors.As(err, &pe); !pe.Sent || errors.Is(err, ErrMessageTooLarge) {
			t.Fatalf("%q: a small message beside it = %v, want \"may have arrived\"", text, err)
		}
	}
}

func TestAFittedCopyKeepsTheIDTheClaimAndABoundedReason(t *testing.T) {
	msg := &transport.Message{Properties: transport.Properties{MessageID: "m", Headers: transport.Table{
		header.ID: "m", header.Claim: "claim-ref", header.Type: "t", header.Error: strings.Repeat("r", 10000),
		"x-small": "s", "x-big": strings.Repeat("b", 9000),
	}}}
	le := &transport.LimitError{Limit: transport.LimitFrameMax, Size: transport.ContentHeaderFrameSize(&msg.Properties), Max: 8192}
	if !fitCopy(msg, le) {
		t.Fatal("fitCopy gave up")
	}
	h := msg.Headers
	if h[header.ID] != "m" || h[header.Claim] != "claim-ref" || h[header.Type] != "t" || h["x-small"] != "s" {
		t.Fatalf("the copy lost a header it had room for: %v", h)
	}
	if _, ok := h["x-big"]; ok {
		t.Fatal("the copy kept x-big")
	}
	reason := h[header.Error].(string)
	if !strings.Contains(reason, "(7952 bytes of the reason cut)") || !strings.Contains(reason, `leaves out header "x-big" (9011 bytes)`) {
		t.Fatalf("reason %.80q… does not say what was cut and left out", reason[len(reason)-300:])
	}
	if n := transport.ContentHeaderFrameSize(&msg.Properties); n > 8192 {
		t.Fatalf("the fitted copy is %d bytes, over 8192", n)
	}
}
