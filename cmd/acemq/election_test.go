package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
)

// TestTheDLQCommandsNeverCallAnUnconfirmedZeroEmpty: RabbitMQ answers 0
// messages for a quorum queue whose leader is being elected. Here the
// queue is a real, empty quorum .dlq, and the management API the commands
// are given answers as RabbitMQ 4 does during the election (the leader on
// record is not online): dlq list must say the count is unknown (no 0,
// exit non-zero), dlq show must not say "is empty" and dlq replay must exit
// non-zero saying so rather than "moved 0". Before replay.Count, list
// printed 0, show "is empty" and replay "moved 0, skipped 0 (drained)",
// exit 0.
func TestTheDLQCommandsNeverCallAnUnconfirmedZeroEmpty(t *testing.T) {
	amqpURL := testenv.AMQPURL(t)
	c := libConn(t, amqpURL)
	q := testenv.Unique("cli.election")
	dlq := q + ".dlq"
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Quorum}).Queue(dlq, acemq.QueueOptions{Type: acemq.Quorum})); err != nil {
		t.Fatal(err)
	}
	deleteQueues(t, c, q, dlq)
	mgmt := electingManagement(t, dlq)

	r := acemqCmd(t, "", "dlq", "list", "--url", amqpURL, "--management-url", mgmt, "--json")
	mustFailWithSentence(t, r, "count unknown for \""+dlq+"\": the queue's leader is being elected")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("dlq list --json: %v\n%s", err, r.stdout)
	}
	if rows[0]["messages"] != nil || !strings.Contains(rows[0]["countUnknown"].(string), "leader is being elected") {
		t.Fatalf("dlq list --json shows %v for a queue whose count is unknown; want messages null and countUnknown saying why", rows[0])
	}
	r = acemqCmd(t, "", "dlq", "list", "--url", amqpURL, "--management-url", mgmt)
	if r.code == 0 || !strings.Contains(r.stdout, "unknown") || strings.Contains(r.stdout, dlq+"  0") {
		t.Fatalf("dlq list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = acemqCmd(t, "", "dlq", "show", dlq, "--url", amqpURL, "--management-url", mgmt)
	mustFailWithSentence(t, r, "leader is being elected")
	if strings.Contains(r.stdout, "is empty") {
		t.Fatalf("dlq show calls the queue empty: %s", r.stdout)
	}

	r = acemqCmd(t, "", "dlq", "replay", dlq, "--url", amqpURL, "--management-url", mgmt)
	mustFailWithSentence(t, r, "try again")
	if strings.Contains(r.stdout, "moved 0") {
		t.Fatalf("dlq replay reports %q for a count it could not confirm", r.stdout)
	}

	// With the node's own management API (its leader online) the queue
	// is empty, and says so.
	r = run0(t, "", "dlq", "replay", dlq, "--url", amqpURL, "--management-url", testManagementURL(t))
	if !strings.Contains(r.stdout, "moved 0, skipped 0 (drained)") {
		t.Fatalf("dlq replay of an empty queue with its leader online: %s", r.stdout)
	}
}
