package main

import (
	"context"
	"errors"
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
// sentence saying it does not and what to do. With opts naming the
// management API (readFlags.options, managementOptions), a 0 is confirmed
// first (replay.Count): a quorum queue whose leader is being elected
// counts 0 whatever it holds, and then the sentence says the count is
// unknown. A command counts a queue once and uses that answer throughout
// (replay.Counted hands it to a read or a replay).
func requireQueue(ctx context.Context, c *acemq.Conn, queue string, opts ...replay.Option) (int, error) {
	n, err := replay.Count(ctx, c, queue, opts...)
	if err != nil {
		return 0, countError(queue, err)
	}
	return n, nil
}

// countError is the command's sentence for a failed replay.Count of
// queue: the count unknown, the queue missing, or the broker not asked.
func countError(queue string, err error) error {
	var unknown *replay.CountUnknownError
	switch {
	case errors.As(err, &unknown):
		return errors.New(sentence(err))
	case transport.Code(err) == transport.CodeNotFound:
		return fmt.Errorf("queue %q does not exist on the broker; check the name (acemq dlq list shows the dead-letter queues)", queue)
	}
	return fmt.Errorf("cannot inspect queue %q (%s); check the connection and retry", queue, strings.TrimSuffix(sentence(err), "."))
}

// managementOptions names the management API a count on the broker at u
// confirms a 0 with: mgmt, else the one queuelist.ManagementURL derives
// from u; none on memory://, which has no leaders.
func managementOptions(u, mgmt string) []replay.Option {
	if isMemory(u) {
		return nil
	}
	if mgmt == "" {
		mgmt, _ = queuelist.ManagementURL(u)
	}
	return []replay.Option{replay.ManagementAPI(mgmt, queuelist.VhostOf(u))}
}
