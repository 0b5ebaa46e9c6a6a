package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/drill"
)

// drillFlags are the settings every drill takes.
type drillFlags struct {
	url     string
	ctl     string
	mgmt    string
	timeout time.Duration
	quiet   bool
}

func (f *drillFlags) register(cmd *cobra.Command, needsCtl bool, timeout time.Duration) {
	urlFlag(cmd, &f.url)
	if needsCtl {
		def := os.Getenv("ACEMQ_RABBITMQCTL")
		if def == "" {
			def = os.Getenv("ACEMQ_TEST_RABBITMQCTL")
		}
		if def == "" {
			def = "rabbitmqctl"
		}
		cmd.Flags().StringVar(&f.ctl, "ctl", def, "the command (with its leading arguments) that runs rabbitmqctl against the broker (default $ACEMQ_RABBITMQCTL, else $ACEMQ_TEST_RABBITMQCTL, else rabbitmqctl)")
	}
	cmd.Flags().DurationVar(&f.timeout, "timeout", timeout, "the most the drill may take; it fails when the time is up")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "print only the verdict line")
}

func (f *drillFlags) env(cmd *cobra.Command) (drill.Env, error) {
	if err := needURL(f.url); err != nil {
		return drill.Env{}, err
	}
	if isMemory(f.url) {
		return drill.Env{}, fmt.Errorf("the drills need a real broker: pass --url amqp://user:pass@host:5672/")
	}
	env := drill.Env{URL: f.url, Ctl: strings.Fields(f.ctl), Management: f.mgmt}
	if !f.quiet {
		env.Progress = cmd.ErrOrStderr()
	}
	return env, nil
}

// runDrill runs one drill under the --timeout and prints its verdict line;
// a failed drill exits 1.
func runDrill(cmd *cobra.Command, f *drillFlags, run func(ctx context.Context, env drill.Env) []*drill.Result) error {
	env, err := f.env(cmd)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	return printVerdicts(cmd.OutOrStdout(), run(ctx, env))
}

func printVerdicts(w io.Writer, results []*drill.Result) error {
	failed := 0
	for _, r := range results {
		fmt.Fprintln(w, r.Line())
		if !r.OK() {
			failed++
		}
	}
	if failed > 0 {
		return &exitCodeError{code: 1, msg: fmt.Sprintf("%d drill verdict(s) failed; the line above says what went wrong", failed)}
	}
	return nil
}

func newDrill() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drill NAME",
		Short: "Reliability drills against a real broker: crash, restart, alarm, soak, hostile, stall",
		Long: `Reliability drills against a real broker. Each is bounded in time, ends with one verdict
line with its numbers ("drill NAME: PASS|FAIL name=value ..."), and exits non-zero on failure.

  crash     a child publisher SIGKILLed and restarted (confirmed-but-missing must be 0);
            a slow child consumer SIGKILLed, some kills between its work and its ack;
            with --db, an outbox producer and relay SIGKILLed (every commit published)
  restart   rabbitmqctl stop_app/start_app under load, classic and quorum queues,
            beside a plain amqp091-go client's dial and confirmed publish
  alarm     a memory alarm under load: paused refusals with the broker's reason,
            Blocked(), health < 1ms and UP, publishing back within 1s of clearing
  soak      hundreds of forced reconnects at a steady rate (--every, the soak's pace),
            broker-side closes and cuts of the TCP path in turn (--close);
            RSS, fds, goroutines and the Go heap must stay flat
  hostile   malformed messages to a typed consumer: each lands where the contract says
  stall     the broker's process stopped (SIGSTOP) under large publishes, so it stops
            reading: every Send within its deadline, the Conn recovering once resumed,
            Close within its context with a write blocked

restart, alarm and stall control the broker with rabbitmqctl (--ctl; stall only to find the
broker's process, or give --pid, and it must run on the broker's machine); the soak's server closes use
the management API (--management) or else rabbitmqctl, and its cuts (--close cut) need neither.`,
		Example: `  acemq drill crash --url amqp://guest:guest@localhost:5672/
  acemq drill restart --url amqp://guest:guest@localhost:5672/ --ctl "rabbitmqctl -n rabbit@host"
  make drills        # every drill, full length, on the project's private node`,
	}
	cmd.AddCommand(newDrillCrash(), newDrillRestart(), newDrillAlarm(), newDrillSoak(), newDrillHostile(), newDrillStall(), newDrillChild())
	return cmd
}

func newDrillCrash() *cobra.Command {
	var f drillFlags
	var o drill.CrashOptions
	var variant, db string
	cmd := &cobra.Command{
		Use:   "crash",
		Short: "SIGKILL a child publisher and a child consumer at random moments; nothing confirmed may go missing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("cannot find this program's own path to start the child process: %v", err)
			}
			o.Child = []string{exe, "drill", "child"}
			switch variant {
			case "publish", "consume", "outbox", "all":
			default:
				return fmt.Errorf("--variant must be publish, consume, outbox or all, got %q", variant)
			}
			if variant == "outbox" && db == "" {
				return fmt.Errorf("the outbox variant needs PostgreSQL; pass --db postgres://user@host/db")
			}
			return runDrill(cmd, &f, func(ctx context.Context, env drill.Env) []*drill.Result {
				var rs []*drill.Result
				if variant == "publish" || variant == "all" {
					rs = append(rs, drill.CrashPublish(ctx, env, o))
				}
				if variant == "consume" || variant == "all" {
					rs = append(rs, drill.CrashConsume(ctx, env, o))
				}
				if variant == "outbox" || (variant == "all" && db != "") {
					rs = append(rs, drill.CrashOutbox(ctx, env, db, o))
				}
				return rs
			})
		},
	}
	f.register(cmd, false, 10*time.Minute)
	cmd.Flags().StringVar(&variant, "variant", "all", "publish, consume, outbox or all (outbox only with --db)")
	cmd.Flags().StringVar(&db, "db", os.Getenv("ACEMQ_DB"), "PostgreSQL URL for the outbox variant (default $ACEMQ_DB); the drill works in a schema of its own")
	cmd.Flags().IntVar(&o.Kills, "kills", 10, "how many times the child is SIGKILLed")
	cmd.Flags().DurationVar(&o.MaxLife, "max-life", time.Second, "a child lives a random time up to this once it shows progress")
	cmd.Flags().IntVar(&o.Workers, "workers", 4, "the child's publishing goroutines or consumer concurrency")
	cmd.Flags().IntVar(&o.Messages, "messages", 2000, "messages queued for the consumer variant")
	return cmd
}

func newDrillRestart() *cobra.Command {
	var f drillFlags
	var o drill.RestartOptions
	var types string
	cmd := &cobra.Command{
		Use:   "restart",
		Short: "Stop and start the broker under load; confirmed lost must be 0; recovery gaps beside a plain client's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, t := range strings.Split(types, ",") {
				switch t = strings.TrimSpace(t); t {
				case "classic", "quorum":
					o.QueueTypes = append(o.QueueTypes, acemq.QueueType(t))
				default:
					return fmt.Errorf("--queue-types takes classic and/or quorum, got %q", t)
				}
			}
			return runDrill(cmd, &f, func(ctx context.Context, env drill.Env) []*drill.Result {
				return []*drill.Result{drill.Restart(ctx, env, o)}
			})
		},
	}
	f.register(cmd, true, 10*time.Minute)
	cmd.Flags().IntVar(&o.Cycles, "cycles", 3, "stop/start cycles per queue type")
	cmd.Flags().DurationVar(&o.Down, "down", time.Second, "how long the broker stays stopped")
	cmd.Flags().IntVar(&o.Publishers, "publishers", 4, "publishing goroutines")
	cmd.Flags().StringVar(&types, "queue-types", "classic,quorum", "queue types, each run separately")
	return cmd
}

func newDrillAlarm() *cobra.Command {
	var f drillFlags
	var o drill.AlarmOptions
	cmd := &cobra.Command{
		Use:   "alarm",
		Short: "Raise and clear a memory alarm under load: paused refusals, Blocked(), fast health, prompt resume",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDrill(cmd, &f, func(ctx context.Context, env drill.Env) []*drill.Result {
				return []*drill.Result{drill.Alarm(ctx, env, o)}
			})
		},
	}
	f.register(cmd, true, 3*time.Minute)
	cmd.Flags().DurationVar(&o.Hold, "hold", 3*time.Second, "how long the alarm stays raised once the connection is blocked")
	cmd.Flags().DurationVar(&o.SendTimeout, "send-timeout", 2*time.Second, "each Send's context deadline")
	cmd.Flags().StringVar(&o.Watermark, "watermark", "0.4", "the vm_memory_high_watermark to set back afterwards")
	return cmd
}

func newDrillStall() *cobra.Command {
	var f drillFlags
	var o drill.StallOptions
	cmd := &cobra.Command{
		Use:   "stall",
		Short: "Stop the broker's process under large publishes: Sends within their deadlines, recovery, a bounded Close",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDrill(cmd, &f, func(ctx context.Context, env drill.Env) []*drill.Result {
				return []*drill.Result{drill.Stall(ctx, env, o)}
			})
		},
	}
	f.register(cmd, true, 3*time.Minute)
	cmd.Flags().IntVar(&o.PID, "pid", 0, "the broker's process id (default: asked of rabbitmqctl, os:getpid())")
	cmd.Flags().IntVar(&o.Publishers, "publishers", 16, "publishing goroutines, each Send under --send-timeout")
	cmd.Flags().IntVar(&o.Size, "size", 8<<20, "each message's body in bytes")
	cmd.Flags().DurationVar(&o.SendTimeout, "send-timeout", 2*time.Second, "each Send's context deadline")
	cmd.Flags().DurationVar(&o.StopAfter, "stop-after", 2*time.Second, "how long the publishers run before each stop")
	cmd.Flags().DurationVar(&o.Hold, "hold", 6*time.Second, "how long the broker stays stopped the first time")
	cmd.Flags().DurationVar(&o.CloseAfter, "close-after", 4*time.Second, "how long the broker has been stopped the second time when Close is called")
	cmd.Flags().DurationVar(&o.CloseTimeout, "close-timeout", 3*time.Second, "Close's context deadline")
	cmd.Flags().IntVar(&o.Unbounded, "unbounded", 16, "Sends without a deadline blocked in their writes when Close is called")
	cmd.Flags().DurationVar(&o.Slack, "slack", time.Second, "how far past its deadline a Send or Close may return")
	return cmd
}

func newDrillSoak() *cobra.Command {
	var f drillFlags
	var o drill.SoakOptions
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Hundreds of forced reconnects at a steady rate; memory, fds and goroutines must stay flat",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDrill(cmd, &f, func(ctx context.Context, env drill.Env) []*drill.Result {
				return []*drill.Result{drill.Soak(ctx, env, o)}
			})
		},
	}
	f.register(cmd, true, 15*time.Minute)
	cmd.Flags().StringVar(&f.mgmt, "management", os.Getenv("ACEMQ_MANAGEMENT_URL"), "the broker's management API (http://user:pass@host:15672/); when given, connections are closed through it rather than with rabbitmqctl, which boots an Erlang VM per call (default $ACEMQ_MANAGEMENT_URL)")
	cmd.Flags().IntVar(&o.Reconnects, "reconnects", 240, "forced reconnects")
	cmd.Flags().StringVar(&o.Close, "close", drill.CloseMixed, "how a reconnect is forced: server (the broker closes the drill's connection: through --management, else rabbitmqctl close_all_connections, which closes every client's), cut (the drill's own TCP proxy ends the connections) or mixed (the two in turn)")
	cmd.Flags().IntVar(&o.WarmUp, "warm-up", 0, "reconnects before the warm-up sample (default a tenth)")
	cmd.Flags().DurationVar(&o.Every, "every", 1500*time.Millisecond, "the soak's pace: at least this between forced reconnects, and never before the Conn recovered and confirmed a publish (the library's 1s first recovery interval is left as it is)")
	cmd.Flags().IntVar(&o.Rate, "rate", 200, "steady publish rate, messages per second")
	return cmd
}

func newDrillHostile() *cobra.Command {
	var f drillFlags
	cmd := &cobra.Command{
		Use:   "hostile",
		Short: "Malformed and hostile messages to a typed consumer: each lands where the contract says",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDrill(cmd, &f, func(ctx context.Context, env drill.Env) []*drill.Result {
				return []*drill.Result{drill.Hostile(ctx, env)}
			})
		},
	}
	f.register(cmd, false, 3*time.Minute)
	return cmd
}

// newDrillChild is the crash drill's child process (hidden): the drill
// re-executes this program with it and SIGKILLs it.
func newDrillChild() *cobra.Command {
	return &cobra.Command{
		Use:                "child",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := drill.ChildMain(cmd.Context(), args, cmd.ErrOrStderr()); code != 0 {
				return &exitCodeError{code: code}
			}
			return nil
		},
	}
}
