package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/queuelist"
	"github.com/acemq-go/acemq/replay"
	"github.com/acemq-go/acemq/transport"
)

// queueDepth is one queue and how many messages it holds.
type queueDepth = queuelist.Depth

// listQueues lists every queue on the broker with its depth (package
// internal/queuelist, which the console shares).
func listQueues(ctx context.Context, brokerURL, mgmtURL string) ([]queueDepth, error) {
	return queuelist.List(ctx, brokerURL, mgmtURL)
}

// isSetAside reports whether q is a {q}.dlq or {q}.parked queue.
func isSetAside(q string) bool { return replay.IsSetAside(q) }

// sourceOf is the source queue of a .dlq/.parked queue.
func sourceOf(q string) string { return replay.SourceOf(q) }

// requireQueue checks that queue exists and returns its ready count, or a
// sentence saying it does not and what to do.
func requireQueue(ctx context.Context, c *acemq.Conn, queue string) (int, error) {
	info, err := c.QueueInfo(ctx, queue)
	if err != nil {
		if transport.Code(err) == transport.CodeNotFound {
			return 0, fmt.Errorf("queue %q does not exist on the broker; check the name (acemq dlq list shows the dead-letter queues)", queue)
		}
		return 0, fmt.Errorf("cannot inspect queue %q (%s); check the connection and retry", queue, strings.TrimSuffix(sentence(err), "."))
	}
	return info.Messages, nil
}
