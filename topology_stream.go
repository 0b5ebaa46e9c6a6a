package acemq

import (
	"fmt"
	"strconv"
	"time"

	"github.com/acemq-go/acemq/internal/wire"
)

// formatMaxAge renders d as an x-max-age value in the largest whole unit:
// days ("7D"), else hours ("36h"), else minutes ("90m"), else seconds
// ("90s"). ok is false when d is not a positive whole number of seconds.
func formatMaxAge(d time.Duration) (s string, ok bool) {
	if d <= 0 || d%time.Second != 0 {
		return "", false
	}
	for _, u := range []struct {
		unit   time.Duration
		suffix string
	}{{24 * time.Hour, "D"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.suffix, true
		}
	}
	return "", false // unreachable: d is whole seconds
}

// streamProblems checks the retention arguments of every queue: valid
// values on streams, and the stream-only ones nowhere else.
func streamProblems(decls []Declaration) []string {
	var problems []string
	for _, d := range decls {
		if d.Kind != DeclQueue {
			continue
		}
		name, args := d.Queue.Name, d.Queue.Args
		if v, ok := args["x-max-age"]; ok {
			switch x := v.(type) {
			case time.Duration:
				problems = append(problems, fmt.Sprintf("stream %q has max age %v; use a positive whole number of seconds (RabbitMQ's x-max-age has no finer unit)", name, x))
			case string:
				if !validMaxAge(x) {
					problems = append(problems, fmt.Sprintf("stream %q has x-max-age %q; use QueueOptions.MaxAge, or a positive integer followed by D, h, m or s (7D, 36h, 90m, 90s)", name, x))
				}
			default:
				problems = append(problems, fmt.Sprintf("stream %q has x-max-age %v of type %T; use QueueOptions.MaxAge", name, v, v))
			}
		}
		for _, k := range []string{"x-max-length-bytes", "x-stream-max-segment-size-bytes"} {
			if v, ok := args[k]; ok {
				if n, isInt := wire.Int(v); !isInt || n < 1 {
					problems = append(problems, fmt.Sprintf("queue %q sets %s to %v; use a positive number of bytes", name, k, v))
				}
			}
		}
		if d.QueueType == Stream {
			continue
		}
		for _, k := range []string{"x-max-age", "x-stream-max-segment-size-bytes"} {
			if _, ok := args[k]; ok {
				problems = append(problems, fmt.Sprintf("queue %q sets %s, but it is a %s queue: only streams have it. Make it a stream (QueueOptions{Type: Stream}), or drop the setting.", name, k, d.QueueType))
			}
		}
	}
	return problems
}

func validMaxAge(s string) bool {
	if len(s) < 2 {
		return false
	}
	n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
	if err != nil || n < 1 {
		return false
	}
	switch s[len(s)-1] {
	case 'Y', 'M', 'D', 'h', 'm', 's':
		return true
	}
	return false
}
