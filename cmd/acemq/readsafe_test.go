package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
	"github.com/acemq-go/acemq/replay"
)

// A quorum .dlq declared with no delivery limit gets RabbitMQ 4's default
// of 20, which every read that hands messages back counted toward before
// (22 reads emptied it). 22 runs each of dlq show, tail, dlq replay with
// a filter that declines everything, and dlq list leave every message in
// place, in order, on every version: where a read would count (RabbitMQ
// 4.0), show, tail and the filtered replay read nothing and say which flag
// reads anyway; where it does not (3.10: no default limit; 4.3: the nack
// is not counted) they read.
func TestReadsNeverCountTowardADeliveryLimit(t *testing.T) {
	url := testenv.AMQPURL(t)
	c := libConn(t, url)
	ctx := context.Background()
	base := testenv.Unique("cli.qq")
	q := base + ".dlq"
	if err := c.Apply(ctx, acemq.NewTopology().Queue(base, acemq.QueueOptions{}).Queue(q, acemq.QueueOptions{Type: acemq.Quorum})); err != nil {
		t.Fatal(err)
	}
	deleteQueues(t, c, base, q)
	var ids []string
	for i := range 3 {
		s, err := c.Publish(ctx, "", q, map[string]int{"n": i}, acemq.SendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.Envelope.ID)
	}
	a, err := replay.Inspect(ctx, c, q, replay.ManagementAPI(os.Getenv("ACEMQ_TEST_MANAGEMENT_URL"), "/"))
	if err != nil {
		t.Fatal(err)
	}
	counts := !a.Safe
	for _, args := range [][]string{
		{"dlq", "show", q, "--json", "--url", url},
		{"tail", q, "-n", "3", "--url", url},
		{"dlq", "replay", q, "--filter", `type == "nothing"`, "--url", url},
		{"dlq", "list", "--url", url},
	} {
		for range 22 {
			r := acemqCmd(t, "", args...)
			switch {
			case args[1] == "list":
				mustSucceed(t, r, args...)
			case counts:
				mustFailWithSentence(t, r, "--unsafe-read", args...)
				if !strings.Contains(r.stderr, "delivery limit of 20") {
					t.Fatalf("acemq %s does not say why: %s", strings.Join(args, " "), r.stderr)
				}
			default:
				mustSucceed(t, r, args...)
			}
		}
	}
	if d := depth(t, c, q); d != 3 {
		t.Fatalf("%s holds %d after the reads, want 3", q, d)
	}
	var got []string
	p, err := c.NewPuller(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for range 3 {
		m, ok, err := p.Pull(ctx, q)
		if err != nil || !ok {
			t.Fatalf("pull: %v %v", ok, err)
		}
		got = append(got, m.Envelope.ID)
		_ = m.Ack()
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("%s holds %v after the reads, want %v in that order", q, got, ids)
	}
}
