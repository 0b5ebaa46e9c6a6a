package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/migrate"
	"github.com/acemq-go/acemq/transport"
)

func newDLQMigrate() *cobra.Command {
	var u, to string
	var rungs []time.Duration
	var writersStopped bool
	var batch int
	cmd := &cobra.Command{
		Use:   "migrate QUEUE",
		Short: "Move QUEUE's .dlq and .parked (and --rung rungs) to the replicated layout's quorum queues, losing and duplicating nothing",
		Long: "Move the library's queues of source queue QUEUE ({QUEUE}.dlq, {QUEUE}.parked, and each rung named with --rung) " +
			"from the form the broker holds (the classic layout's classic queues) to the form --to declares (the replicated layout's " +
			"quorum queues), keeping their names. A queue's type cannot change in place, so each message is copied (confirmed) to " +
			"{name}.migrating, the old queue is deleted only if nothing arrived since, the queue is declared in its new form and the " +
			"copies move back (confirmed, then acked). A run that is interrupted (even killed) is finished by running the command again; " +
			"no message is lost or counted twice. Dead letters written during the move are moved too. Go services keep working " +
			"throughout (a Conn uses a library queue in the other layout and warns); services of other AceMQ libraries that declare " +
			"the classic queues get 406 PRECONDITION_FAILED once it has moved (acemq topology plan says so first).",
		Example: `  acemq dlq migrate orders.new --url amqp://guest:guest@localhost:5672/
  acemq dlq migrate orders.new --rung 30s --rung 5m`,
		Args: exactQueueArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			q := args[0]
			if isSetAside(q) {
				q = sourceOf(q)
			}
			layout := acemq.Layout(strings.ToLower(to))
			if layout != acemq.ReplicatedLayout && layout != acemq.ClassicLayout {
				return fmt.Errorf("--to %q is not a layout; use replicated or classic", to)
			}
			ctx := cmd.Context()
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			c, err := connect(cctx, u, "acemq-dlq-migrate", acemq.Config{Layout: layout})
			cancel()
			if err != nil {
				return err
			}
			defer closeConn(c)
			decls, err := c.LayoutDeclarations(ctx, q, rungs...)
			if err != nil {
				return fmt.Errorf("cannot learn the broker's version (%s); check the connection and retry", strings.TrimSuffix(sentence(err), "."))
			}
			for i, d := range decls {
				var bind *transport.BindingSpec
				if i < 2 { // .dlq and .parked are bound to acemq.dlx on their own name
					bind = &transport.BindingSpec{Queue: d.Queue.Name, Exchange: acemq.DeadLetterExchange, RoutingKey: d.Queue.Name}
				}
				rep, err := migrate.Queue(ctx, c, d, decls[0], migrate.Options{Progress: cmd.ErrOrStderr(), Binding: bind, WritersStopped: writersStopped, Batch: batch})
				if err != nil {
					return fmt.Errorf("moving %s stopped: %s", d.Queue.Name, strings.TrimSuffix(sentence(err), "."))
				}
				fmt.Fprintln(cmd.OutOrStdout(), rep)
			}
			return nil
		},
	}
	urlFlag(cmd, &u)
	cmd.Flags().StringVar(&to, "to", string(acemq.ReplicatedLayout), "the layout to move to: replicated (quorum queues) or classic")
	cmd.Flags().DurationSliceVar(&rungs, "rung", nil, "a retry rung of QUEUE to move too, by its delay (30s, 5m); repeat for each")
	cmd.Flags().IntVar(&batch, "batch", 200, "messages per confirmed batch")
	cmd.Flags().BoolVar(&writersStopped, "writers-stopped", false, "the old queues are quorum queues and nothing writes to them until the move ends (RabbitMQ cannot delete a quorum queue only if it is empty)")
	return cmd
}
