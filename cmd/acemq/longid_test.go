package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
)

// TestLongIDsAreCutInTextAndWholeInJSON: x-acemq-id is an AMQP long
// string, so a publisher can send a 300-byte id (or a 60,000-byte one).
// Text meant for a person shows an id past 64 bytes as its first 64 and
// its length (internal/idtext), so it cannot flood a terminal: dlq show's
// id, correlation and causation lines, and dlq replay's warning about
// duplicate ids. JSON, which programs read, keeps every id whole: dlq show
// --json and tail's lines (with --ack a tail line is the only record of
// what was removed). Before the fix dlq show and the replay warning
// printed the whole ids.
func TestLongIDsAreCutInTextAndWholeInJSON(t *testing.T) {
	url := testenv.AMQPURL(t)
	c := libConn(t, url)
	q := testenv.Unique("cli.longid")
	seedDLQ(t, c, q, 0)
	dlq := q + ".dlq"
	id := "id-" + strings.Repeat("i", 297)
	corr := "corr-" + strings.Repeat("c", 395)
	cause := "cause-" + strings.Repeat("k", 994)
	for range 2 { // the same id twice: replay warns about it
		env := acemq.NewEnvelope()
		env.ID, env.CorrelationID, env.CausationID, env.Type, env.Error = id, corr, cause, "Order", "bad data"
		// The id is too long for the AMQP message-id property (255 bytes):
		// it travels in its header only, as a hostile publisher sends it.
		err := c.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: dlq, ContentType: "application/json", Headers: env.WireHeaders(), Body: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
	}
	cut := func(s string) string { return s[:64] + "… (" + strconv.Itoa(len(s)) + " bytes)" }
	whole := func(out string) bool {
		return strings.Contains(out, id[:65]) || strings.Contains(out, corr[:65]) || strings.Contains(out, cause[:65])
	}

	r := run0(t, "", "dlq", "show", dlq, "--url", url)
	for _, want := range []string{"--- " + cut(id) + "\n", "correlation: " + cut(corr) + "\n", "causation:   " + cut(cause) + "\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("dlq show lacks %q:\n%s", want, r.stdout)
		}
	}
	if whole(r.stdout + r.stderr) {
		t.Fatalf("dlq show printed an id past 64 bytes:\n%s", r.stdout)
	}

	r = run0(t, "", "dlq", "show", dlq, "--json", "--url", url)
	var shown []shownMessage
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil {
		t.Fatalf("dlq show --json: %v\n%s", err, r.stdout)
	}
	if len(shown) != 2 || shown[0].ID != id || shown[0].CorrelationID != corr || shown[0].CausationID != cause {
		t.Fatalf("dlq show --json does not keep the ids whole: %+v", shown)
	}

	r = run0(t, "", "dlq", "replay", dlq, "--url", url)
	if !strings.Contains(r.stderr, "appear more than once in "+dlq+" (e.g. "+cut(id)+")") || whole(r.stderr) || !strings.Contains(r.stdout, "moved 2") {
		t.Fatalf("dlq replay: stdout %q, stderr:\n%s", r.stdout, r.stderr)
	}

	r = run0(t, "", "tail", q, "--ack", "-n", "2", "--url", url)
	if lines := parseTail(t, r.stdout); len(lines) != 2 || lines[0].ID != id || lines[1].CorrelationID != corr {
		t.Fatalf("tail's JSON lines do not keep the ids whole: %+v", lines)
	}
}
