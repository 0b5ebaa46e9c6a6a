package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/redact"
)

// exitCodeError ends the command with a specific exit code and, when msg is
// set, one line on stderr (health uses it: DEGRADED is not a failure of the
// command, but it is not UP either).
type exitCodeError struct {
	code int
	msg  string
}

func (e *exitCodeError) Error() string { return e.msg }

func asExitCode(err error, target **exitCodeError) bool { return errors.As(err, target) }

// sentence renders err as the one line the command prints: the library's
// "acemq: " prefixes removed (main prints its own) and newlines folded.
func sentence(err error) string {
	s := strings.ReplaceAll(err.Error(), "acemq: ", "")
	s = strings.Join(strings.Fields(s), " ")
	return s
}

// urlFlag registers --url with $ACEMQ_URL as its default.
func urlFlag(cmd *cobra.Command, u *string) {
	cmd.Flags().StringVar(u, "url", os.Getenv("ACEMQ_URL"), "broker URL: memory://name, amqp://user:pass@host:port/vhost (default $ACEMQ_URL)")
}

// needURL says what to do when neither --url nor $ACEMQ_URL was given.
func needURL(u string) error {
	if strings.TrimSpace(u) == "" {
		return errors.New("no broker URL was given; pass --url amqp://user:pass@host:5672/ (or memory://name) or set ACEMQ_URL")
	}
	return nil
}

// connect dials the broker with the command's settings and turns a failure
// into one sentence saying what to check.
// cfg's client name and connection timeout are the command's, and so is
// its logger unless cfg sets one.
func connect(ctx context.Context, rawURL, name string, cfg ...acemq.Config) (*acemq.Conn, error) {
	if err := needURL(rawURL); err != nil {
		return nil, err
	}
	var base acemq.Config
	if len(cfg) > 0 {
		base = cfg[0]
	}
	if base.Logger == nil {
		base.Logger = slog.New(slog.DiscardHandler)
	}
	base.ClientName, base.ConnectionTimeout = name, 5*time.Second
	c, err := acemq.Connect(ctx, rawURL, base)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to the broker at %s (%s); check that it is running and that --url is right", redact.URL(rawURL), strings.TrimSuffix(sentence(rootCause(err)), "."))
	}
	return c, nil
}

// closeConn closes c within a bounded time, so a command never hangs on exit.
func closeConn(c *acemq.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// isMemory reports whether the URL names the in-process broker.
func isMemory(raw string) bool { return strings.HasPrefix(raw, "memory://") }

// rootCause is the innermost error of a single-wrapped chain (for a refused
// dial, "connection refused"), which says more in one line than the chain.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil || next.Error() == "" {
			return err
		}
		err = next
	}
}
