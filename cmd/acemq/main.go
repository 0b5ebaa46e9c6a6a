// Command acemq is AceMQ for Go's command: the demo (the main job) and the
// operator's tools.
//
//	go run ./cmd/acemq demo               # the order flow on the in-process broker
//	go run ./cmd/acemq demo --url amqp://guest:guest@localhost:5672/
//	acemq topology plan -f topology.yaml  # what apply would change
//	acemq dlq list                        # every .dlq/.parked queue with its depth
//	acemq bench --rate 2000 --for 10s     # latency percentiles from the intended send time
//
// Every subcommand takes --url (default $ACEMQ_URL; memory://demo for the
// demo), exits 0 on success and otherwise prints one sentence saying what
// went wrong and what to do, and exits non-zero.
//
// The manual's page on the acemq command and the console: https://github.com/acemq-go/acemq/blob/main/docs/command.md
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq/cmd/acemq/internal/safetext"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes the command line and returns the process exit code.
func run(args []string) int {
	root := newRoot()
	root.SetArgs(args)
	// Ctrl-C or SIGTERM cancels the command's context: tail returns what
	// it holds, load prints its final line, bench and replay stop between
	// messages.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		var ec *exitCodeError
		if asExitCode(err, &ec) {
			if ec.msg != "" {
				fmt.Fprintln(os.Stderr, "acemq:", safetext.Line(ec.msg))
			}
			return ec.code
		}
		msg := sentence(err)
		if strings.HasPrefix(msg, "unknown command") {
			msg += "; run `acemq --help` for the commands and the arguments they take"
		}
		// An error can quote a queue name, a header or a reason a
		// publisher chose: it is shown by the safetext rule.
		fmt.Fprintln(os.Stderr, "acemq:", safetext.Line(msg))
		return 1
	}
	return 0
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "acemq",
		Short: "AceMQ for Go: the demo and the operator's tools",
		Long: `AceMQ for Go: the demo and the operator's tools.

Every subcommand takes --url (default $ACEMQ_URL; memory://demo for the demo).
On failure it prints one sentence saying what to do and exits non-zero.`,
		Example: `  acemq demo
  acemq dlq list --url amqp://guest:guest@localhost:5672/
  acemq topology plan -f topology.yaml`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%v; run `%s --help` for the flags it takes", err, c.CommandPath())
	})
	root.AddCommand(newDemo(), newTopology(), newDLQ(), newPublish(), newTail(), newBench(), newLoad(), newHealth(), newCerts(), newConsole(), newDrill(), newSaga(), newStream())
	return root
}
