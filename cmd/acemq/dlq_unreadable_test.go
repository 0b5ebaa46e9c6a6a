package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
)

// A message published by another client with headers nested 40 deep used
// to close dlq show's own connection; now it is shown, its headers decoded
// as JSON with a note saying why they are apart, and left on the queue.
func TestDLQShowDecodesHeadersTheGoClientCannotRead(t *testing.T) {
	url := testenv.AMQPURL(t)
	c := libConn(t, url)
	q := testenv.Unique("cli.unreadable")
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), q) })
	ch := testenv.RawChannel(t, url)
	deep := amqp.Table{"leaf": "bottom"}
	for range 39 {
		deep = amqp.Table{"a": deep}
	}
	if err := ch.Publish("", q, false, false, amqp.Publishing{MessageId: "deep-1", ContentType: "text/plain",
		Headers: amqp.Table{"x-app": "fine", "x-deep": deep}, Body: []byte("hello")}); err != nil {
		t.Fatal(err)
	}

	// q is a source queue, so dlq show reads it only with --live-queue.
	r := run0(t, "", "dlq", "show", q, "--live-queue", "--json", "--url", url)
	var shown []shownMessage
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil {
		t.Fatalf("dlq show --json: %v\n%s", err, r.stdout)
	}
	if len(shown) != 1 || shown[0].ID != "deep-1" || shown[0].Body != "hello" || shown[0].Headers["x-app"] != "fine" {
		t.Fatalf("dlq show: %+v", shown)
	}
	s := shown[0]
	if !strings.Contains(s.Note, "cannot be read by the Go AMQP client") || !strings.Contains(s.Note, `header "x-deep" nests tables or arrays 40 levels deep`) {
		t.Fatalf("note %q does not say why", s.Note)
	}
	v, levels := s.UnreadableHeaders["x-deep"], 0
	for {
		m, ok := v.(map[string]any)
		if !ok {
			break
		}
		levels++
		if leaf, ok := m["leaf"]; ok {
			if leaf != "bottom" {
				t.Fatalf("leaf %v, want bottom", leaf)
			}
		}
		v = m["a"]
	}
	if levels != 40 {
		t.Fatalf("the decoded x-deep nests %d levels, want 40: %v", levels, s.UnreadableHeaders)
	}
	text := run0(t, "", "dlq", "show", q, "--live-queue", "--url", url).stdout
	if !strings.Contains(text, "note:        these headers cannot be read") || !strings.Contains(text, "unreadable headers (JSON):") {
		t.Fatalf("dlq show text lacks the note or the headers:\n%s", text)
	}
	if d := depth(t, c, q); d != 1 {
		t.Fatalf("dlq show removed the message: depth %d, want 1", d)
	}
}
