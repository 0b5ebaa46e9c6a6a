package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
)

// When the queues cannot be listed (the management API is down) the
// overview says so and what to do; it never says there are no dead
// letters.
func TestOverviewSaysTheQueuesAreUnknownWhenTheListingFails(t *testing.T) {
	f := newFixture(t, memURL(t), func(c *console.Config) {
		c.ListQueues = func(context.Context) ([]string, error) {
			return nil, errors.New("cannot list queues: the RabbitMQ management API at http://127.0.0.1:15672/ did not answer (connection refused); enable the rabbitmq_management plugin or pass --management-url")
		}
	})
	_, body := f.get("/")
	if strings.Contains(body, "No .dlq or .parked queues") {
		t.Error("the overview says there are no dead-letter queues when it could not list them")
	}
	if !strings.Contains(body, "management API") || !strings.Contains(body, "not &#34;no dead letters&#34;") {
		t.Errorf("the overview does not say what failed: %s", body)
	}
	_, js := f.get("/api/overview")
	var out struct {
		Error string `json:"error"`
	}
	if json.Unmarshal([]byte(js), &out) != nil || !strings.Contains(out.Error, "unknown") {
		t.Errorf("/api/overview: %s", js)
	}
}

// When the AMQP side is down a queue's depth is unknown, never 0, and the
// row says what failed and what to do.
func TestOverviewShowsAnUnreadableDepthAsUnknown(t *testing.T) {
	u := memURL(t)
	owner := connect(t, u)
	q := seedQueue(t, owner)
	dlq := acemq.DeadLetterQueue(q)
	deadLetter(t, owner, dlq, letter{reason: "x"}, letter{reason: "y"})
	f := newFixture(t, u, func(c *console.Config) {
		c.ListQueues = func(context.Context) ([]string, error) { return []string{dlq}, nil }
	})
	if err := f.conn.Close(context.Background()); err != nil { // the console's connection is gone
		t.Fatal(err)
	}
	_, js := f.get("/api/overview")
	var out struct {
		Queues []struct {
			Name  string `json:"name"`
			Depth *int   `json:"depth"`
			Error string `json:"error"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(js), &out); err != nil || len(out.Queues) != 1 {
		t.Fatalf("/api/overview: %v %s", err, js)
	}
	row := out.Queues[0]
	if row.Depth != nil || !strings.Contains(row.Error, "depth unknown") || !strings.Contains(row.Error, "Check that the broker is up") {
		t.Fatalf("row %+v (depth %v), want depth null and an error that says what to do", row, row.Depth)
	}
	_, body := f.get("/")
	if strings.Contains(body, `class="num depth">0<`) || !strings.Contains(body, `class="num depth">unknown<`) || !strings.Contains(body, "depth unknown") {
		t.Fatalf("the overview page shows an unreadable depth as %s", body)
	}
	// A page on the queue says the same and what to do.
	resp, body := f.get("/q/" + dlq)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "Check that the broker is up") {
		t.Fatalf("queue page with the broker gone: %d %s", resp.StatusCode, body)
	}
}
