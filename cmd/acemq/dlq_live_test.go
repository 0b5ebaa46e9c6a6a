package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
)

// dlq show reads by taking and returning: on a live quorum queue each read
// raises x-delivery-count. It refuses a queue that is not .dlq/.parked,
// and with --live-queue it says on stderr what the read does.
func TestDLQShowRefusesALiveQueueUnlessToldWhatItDoes(t *testing.T) {
	url := testenv.AMQPURL(t)
	c := libConn(t, url)
	q := testenv.Unique("cli.live")
	// Without a delivery limit (-1 on RabbitMQ 4, none on 3), so the read
	// counts in x-delivery-count but nothing acts on it; a limited one is
	// refused without --unsafe-read (TestReadsNeverCountTowardADeliveryLimit).
	limit := 0
	if testenv.RabbitMajor(t) >= 4 {
		limit = -1
	}
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Quorum, DeliveryLimit: limit})); err != nil {
		t.Fatal(err)
	}
	deleteQueues(t, c, q)
	if _, err := c.Publish(context.Background(), "", q, map[string]string{"order": "o-1"}, acemq.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	deliveries := func(r result) any {
		t.Helper()
		var shown []shownMessage
		if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil || len(shown) != 1 {
			t.Fatalf("dlq show --json: %v\n%s", err, r.stdout)
		}
		return shown[0].Headers["x-delivery-count"]
	}

	args := []string{"dlq", "show", q, "--json", "--url", url}
	r := acemqCmd(t, "", args...)
	mustFailWithSentence(t, r, "is not a dead-letter queue", args...)
	if !strings.Contains(r.stderr, "x-delivery-count") || !strings.Contains(r.stderr, "pass --live-queue") {
		t.Fatalf("the refusal does not say why or which flag reads anyway: %s", r.stderr)
	}

	live := append(args, "--live-queue")
	r = run0(t, "", live...)
	if !strings.Contains(r.stderr, "warning: --live-queue") || !strings.Contains(r.stderr, "x-delivery-count") {
		t.Fatalf("--live-queue does not say what it does to the queue: %q", r.stderr)
	}
	if n := deliveries(r); n != nil {
		t.Fatalf("the first read saw x-delivery-count %v: the refused command took the message", n)
	}
	if n := deliveries(run0(t, "", live...)); n != "1" {
		t.Fatalf("the second read saw x-delivery-count %v, want 1: what the warning says a read does", n)
	}

	if h := run0(t, "", "dlq", "show", "--help").stdout; !strings.Contains(h, "--live-queue") || !strings.Contains(h, "x-delivery-count") {
		t.Fatalf("dlq show --help does not say what --live-queue does:\n%s", h)
	}
	d := testenv.Unique("cli.notlive")
	seedDLQ(t, c, d, 1)
	if r := run0(t, "", "dlq", "show", d+".dlq", "--url", url); r.stderr != "" {
		t.Fatalf("dlq show of a .dlq queue warned: %q", r.stderr)
	}
}
