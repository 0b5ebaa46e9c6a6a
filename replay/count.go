package replay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/acemq-go/acemq"
)

// CountUnknownError is a count that could not be confirmed: the broker
// answered 0 for a quorum queue or a stream whose leader it could not
// show to be online (during a leader election after a node was lost,
// RabbitMQ answers 0 whatever the queue holds), or the management API
// that would say so did not answer. The queue may hold messages; nothing
// was read or moved.
type CountUnknownError struct {
	// Queue is the queue counted.
	Queue string
	// Why says what was asked and what answered, in a sentence.
	Why string
}

// Error says that the count is unknown, why, and to try again.
func (e *CountUnknownError) Error() string {
	return fmt.Sprintf("acemq: count unknown for %q: %s; try again", e.Queue, strings.TrimSuffix(e.Why, "."))
}

// electionWhy is the sentence for a quorum queue or stream without an
// online leader.
const electionWhy = "the queue's leader is being elected (RabbitMQ answers 0 messages until it has one)"

// Count is how many messages queue holds ready, as the broker counts them
// (a passive queue.declare). A non-zero count is returned as it is, at the
// cost of that one question. A 0 is believed only once it is confirmed,
// because RabbitMQ answers 0 for a quorum queue (or a stream) whose leader
// it has on record does not answer within 250 ms: for the seconds of a
// leader election after a node was lost, every such queue counts empty.
// With ManagementAPI, Count asks RabbitMQ's management API for the queue's
// record (GET /api/queues/{vhost}/{name}, statistics off): a classic
// queue's 0 stands; a quorum queue's or a stream's stands only when the
// record names a leader that is among its members and online, and then
// the count is asked once more (the election may have ended between the
// two questions) and that answer returned. Otherwise, and when the
// management API does not answer, the error is a *CountUnknownError.
//
// Without ManagementAPI a 0 is returned as the broker gave it (the acemq
// command and the console name the management API on RabbitMQ, none on
// the in-process broker, which has no leaders). A queue that does not
// exist is an error carrying the broker's 404 (transport.Code). Other
// options have no effect on Count.
func Count(ctx context.Context, conn *acemq.Conn, queue string, opts ...Option) (int, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	return count(ctx, conn, queue, &cfg)
}

// count is Count with a pass's config.
func count(ctx context.Context, conn *acemq.Conn, queue string, cfg *config) (int, error) {
	ask := func(ctx context.Context) (int, error) {
		info, err := conn.QueueInfo(ctx, queue)
		return info.Messages, err
	}
	return confirmedCount(ctx, ask, cfg.mgmtURL, cfg.vhost, queue)
}

// confirmedCount asks the count with ask and confirms a 0 with the
// management API at mgmt ("": no confirmation), as Count says.
func confirmedCount(ctx context.Context, ask func(context.Context) (int, error), mgmt, vhost, queue string) (int, error) {
	n, err := ask(ctx)
	if err != nil || n != 0 || mgmt == "" {
		return n, err
	}
	why, replicated, gone := leaderless(ctx, mgmt, vhost, queue)
	switch {
	case gone:
		// The management API knows no such queue: deleted since the
		// count (the broker's 404 then says so), or a management API on
		// another virtual host, which confirms nothing.
		if n, err := ask(ctx); err != nil || n != 0 {
			return n, err
		}
		return 0, &CountUnknownError{Queue: queue, Why: fmt.Sprintf("RabbitMQ answered 0 messages, which it also answers while a quorum queue's leader is being elected, and the management API knows no queue %q in virtual host %q to say whether that is so (check the management URL's virtual host)", queue, vhost)}
	case why != "":
		return 0, &CountUnknownError{Queue: queue, Why: why}
	case !replicated:
		return 0, nil // a classic queue's 0 is its own node's
	}
	// The leader is online now; the 0 may be from before it was.
	return ask(ctx)
}

// queueRecord is what the management API says about a queue's replicas.
// Leader, Members and Online are nil when the record does not carry them.
type queueRecord struct {
	Type    string    `json:"type"`
	Leader  *string   `json:"leader"`
	Members *[]string `json:"members"`
	Online  *[]string `json:"online"`
}

// leaderless asks the management API at mgmt for queue's record and says
// why a 0 from it cannot be believed ("" when it can), and whether the
// queue is replicated (a quorum queue or a stream, whose count comes from
// its leader).
func leaderless(ctx context.Context, mgmt, vhost, queue string) (why string, replicated, gone bool) {
	if vhost == "" {
		vhost = "/"
	}
	path := "api/queues/" + url.PathEscape(vhost) + "/" + url.PathEscape(queue)
	// Statistics off: the record as the broker's metadata has it now
	// (RabbitMQ computes leader and online as it answers), not the
	// statistics, which lag by seconds and vanish with the node that
	// emitted them.
	var q queueRecord
	if err := getJSON(ctx, mgmt, path+"?disable_stats=true", &q); err != nil {
		var status *statusError
		if errors.As(err, &status) && status.code == http.StatusNotFound {
			return "", false, true
		}
		return fmt.Sprintf("RabbitMQ answered 0 messages, which it also answers while a quorum queue's leader is being elected, and whether that is so could not be learned: %s", strings.TrimSuffix(err.Error(), ".")), false, false
	}
	if q.Type == "stream" && q.Leader == nil {
		// RabbitMQ 3.x names a stream's leader in its statistics only.
		var s queueRecord
		if err := getJSON(ctx, mgmt, path, &s); err == nil {
			q.Leader, q.Members, q.Online = s.Leader, s.Members, s.Online
		}
	}
	return judgeLeader(q), q.Type == "quorum" || q.Type == "stream", false
}

// judgeLeader says why a 0 from a queue with record q cannot be believed
// ("" when it can): a classic queue's can; a quorum queue's or a stream's
// only when q names a leader that is one of its members and online.
func judgeLeader(q queueRecord) string {
	switch q.Type {
	case "", "classic":
		return "" // one node; RabbitMQ before 3.9 names no type
	case "quorum", "stream":
	default:
		return fmt.Sprintf("RabbitMQ answered 0 messages for a queue of type %q, whose count this tool cannot confirm", q.Type)
	}
	switch {
	case q.Leader == nil || *q.Leader == "" || *q.Leader == "undefined":
		return electionWhy + ": the management API names no leader"
	case q.Members != nil && !slices.Contains(*q.Members, *q.Leader):
		return fmt.Sprintf("%s: the leader on record, %s, is not one of its members", electionWhy, *q.Leader)
	case q.Online == nil || !slices.Contains(*q.Online, *q.Leader):
		return fmt.Sprintf("%s: the leader on record, %s, is not online", electionWhy, *q.Leader)
	}
	return ""
}
