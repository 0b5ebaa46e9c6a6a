package acemq

import (
	"fmt"
	"math"
)

// versionArgProblems reports the queue arguments a RabbitMQ version
// refuses, so that Validate refuses them before the broker does (the broker
// answers 406 and closes the channel, in the middle of an Apply). Measured
// on 3.10.8, 4.0.5 and 4.3.6 (docs/support.md):
//
//   - x-queue-mode and x-queue-version on a quorum queue or a stream: every
//     version refuses them ("invalid arg ... of queue type").
//   - x-queue-version 1 on a classic queue: 4.3 refuses it ("unsupported
//     queue version '1'"); 3.10 and 4.0 accept it.
//
// x-queue-mode on a classic queue is accepted by all three (with any value,
// and kept: a re-declaration must repeat it), so it is a plan warning
// (classicQueueModeWarning), not a refusal.
func versionArgProblems(d Declaration) []string {
	if d.Kind != DeclQueue {
		return nil
	}
	name, args := d.Queue.Name, d.Queue.Args
	var problems []string
	switch d.QueueType {
	case Quorum, Stream:
		for _, arg := range []string{"x-queue-mode", "x-queue-version"} {
			if _, ok := args[arg]; ok {
				problems = append(problems, fmt.Sprintf("queue %q sets %s, which a %s queue does not take: RabbitMQ refuses it (406) on every version (3.10, 4.0 and 4.3 alike). Drop the argument.", name, arg, d.QueueType))
			}
		}
	case Classic:
		if v, ok := args["x-queue-version"]; ok && isIntegerOne(v) {
			problems = append(problems, fmt.Sprintf("queue %q sets x-queue-version 1, which RabbitMQ 4.3 refuses (406 unsupported queue version '1'); 3.10 and 4.0 still accept it. Leave the argument out (or use 2, which every version accepts); a queue that already has version 1 keeps it, and RabbitMQ refuses to re-declare it with another version, so re-create it before moving to 4.3.", name))
		}
	}
	return problems
}

// classicQueueModeWarning is the plan warning for x-queue-mode on a classic
// queue, or "": RabbitMQ 3.12 and later ignore it (every classic queue
// keeps its messages on disk, as lazy ones did), yet accept any value and
// keep it, so a re-declaration has to repeat it.
func classicQueueModeWarning(d Declaration) string {
	if d.Kind != DeclQueue || d.QueueType != Classic {
		return ""
	}
	v, ok := d.Queue.Args["x-queue-mode"]
	if !ok {
		return ""
	}
	return fmt.Sprintf("classic queue %q sets x-queue-mode=%v, which RabbitMQ 3.12 and later ignore; every version tested (3.10, 4.0, 4.3) accepts it and keeps it, so keep it only to match an existing queue, and leave it out of new ones", d.Queue.Name, v)
}

// isIntegerOne reports whether v is the integer 1 in any of the numeric
// types an argument table can carry.
func isIntegerOne(v any) bool {
	switch n := v.(type) {
	case int:
		return n == 1
	case int8:
		return n == 1
	case int16:
		return n == 1
	case int32:
		return n == 1
	case int64:
		return n == 1
	case uint:
		return n == 1
	case uint8:
		return n == 1
	case uint16:
		return n == 1
	case uint32:
		return n == 1
	case uint64:
		return n == 1
	case float32:
		return n == 1
	case float64:
		return n == 1 && !math.IsInf(n, 0)
	}
	return false
}
