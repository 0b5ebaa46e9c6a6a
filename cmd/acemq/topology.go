package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/safetext"
)

// topologyFile is the YAML form of a topology: exchanges, queues (with
// dead-lettering and a retry policy) and bindings.
type topologyFile struct {
	// Layout is the layout the library's own queues are declared in:
	// classic (the default) or replicated (Config.Layout).
	Layout    string `yaml:"layout"`
	Exchanges []struct {
		Name string `yaml:"name"`
		Type string `yaml:"type"`
	} `yaml:"exchanges"`
	Queues []struct {
		Name          string     `yaml:"name"`
		Type          string     `yaml:"type"`
		DeadLetters   bool       `yaml:"deadLetters"`
		DeliveryLimit int        `yaml:"deliveryLimit"`
		Retry         *retryYAML `yaml:"retry"`
	} `yaml:"queues"`
	Bindings []struct {
		Queue    string `yaml:"queue"`
		Exchange string `yaml:"exchange"`
		Key      string `yaml:"key"`
	} `yaml:"bindings"`
}

// retryYAML is a retry policy: exponential (attempts, initial, max),
// linear (attempts, step, max) or fixed (attempts, delay), held on broker
// rungs from brokerFrom on, or in the queue itself (waits: queue or
// where-supported: RabbitMQ 4.3's delayed retry).
type retryYAML struct {
	Attempts   int    `yaml:"attempts"`
	Initial    string `yaml:"initial"`
	Step       string `yaml:"step"`
	Max        string `yaml:"max"`
	Delay      string `yaml:"delay"`
	BrokerFrom string `yaml:"brokerFrom"`
	Waits      string `yaml:"waits"`
}

const topologyExample = `# topology.yaml
layout: replicated         # the library's .dlq, .parked and rungs: classic (default) | replicated (quorum)
exchanges:
  - name: orders
    type: topic            # direct | topic | fanout | headers
queues:
  - name: orders.new
    type: quorum           # quorum (default) | classic | stream
    deadLetters: true      # acemq.dlx, orders.new.dlq, orders.new.parked
    retry:                 # exponential; {attempts: 3, delay: 10s} for fixed,
      attempts: 5          # {attempts: 5, step: 10s, max: 1m} for linear
      initial: 10s
      max: 5m
      # waits: rungs         # rungs (default) | queue | where-supported: held
      #                      # in the quorum queue itself by RabbitMQ 4.3's
      #                      # delayed retry (linear or fixed only)
bindings:
  - queue: orders.new
    exchange: orders
    key: order.created`

func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a duration; write it like 500ms, 10s or 5m", field, s)
	}
	return d, nil
}

func (r *retryYAML) policy(queue string) (acemq.RetryPolicy, error) {
	where := fmt.Sprintf("queue %q retry", queue)
	if r.Attempts < 1 {
		return acemq.RetryPolicy{}, fmt.Errorf("%s needs attempts of 1 or more (the first delivery counts)", where)
	}
	initial, err := parseDuration(where+" initial", r.Initial)
	if err != nil {
		return acemq.RetryPolicy{}, err
	}
	maxd, err := parseDuration(where+" max", r.Max)
	if err != nil {
		return acemq.RetryPolicy{}, err
	}
	delay, err := parseDuration(where+" delay", r.Delay)
	if err != nil {
		return acemq.RetryPolicy{}, err
	}
	step, err := parseDuration(where+" step", r.Step)
	if err != nil {
		return acemq.RetryPolicy{}, err
	}
	from, err := parseDuration(where+" brokerFrom", r.BrokerFrom)
	if err != nil {
		return acemq.RetryPolicy{}, err
	}
	var p acemq.RetryPolicy
	set := 0
	for _, s := range []string{r.Delay, r.Initial, r.Step} {
		if s != "" {
			set++
		}
	}
	switch {
	case set != 1:
		return acemq.RetryPolicy{}, fmt.Errorf("%s sets more or fewer than one schedule; give one of delay (fixed), initial and max (exponential) or step and max (linear)", where)
	case r.Delay != "":
		p = acemq.Fixed(r.Attempts, delay)
	case r.Initial != "":
		p = acemq.Exponential(r.Attempts, initial, maxd)
	default:
		p = acemq.Linear(r.Attempts, step, maxd)
	}
	if r.BrokerFrom != "" {
		p = p.WaitInBrokerFrom(from)
	}
	switch strings.ToLower(r.Waits) {
	case "", "rungs":
	case "queue":
		p = p.HoldWaits(acemq.WaitsInQueue)
	case "where-supported":
		p = p.HoldWaits(acemq.WaitsInQueueWhereSupported)
	default:
		return acemq.RetryPolicy{}, fmt.Errorf("%s has waits %q; use rungs, queue or where-supported", where, r.Waits)
	}
	if err := p.Err(); err != nil {
		return acemq.RetryPolicy{}, fmt.Errorf("%s cannot be used: %s", where, sentence(err))
	}
	return p, nil
}

// loadTopology reads and validates a topology file. Every error names the
// file and says what to fix.
func loadTopology(path string, stdin io.Reader) (*acemq.Topology, error) {
	t, _, err := loadTopologyFile(path, stdin)
	return t, err
}

// loadTopologyFile is loadTopology that also returns the file's layout.
func loadTopologyFile(path string, stdin io.Reader) (*acemq.Topology, acemq.Layout, error) {
	if path == "" {
		return nil, "", errors.New("no topology file was given; pass -f topology.yaml (or -f - for stdin)")
	}
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, "", fmt.Errorf("cannot read the topology file %s (%v); check the path", path, err)
	}
	var f topologyFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, "", fmt.Errorf("the topology file %s is not valid YAML for a topology (%s); see `acemq topology --help` for the format", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	layout := acemq.Layout(strings.ToLower(f.Layout))
	if layout != "" && layout != acemq.ClassicLayout && layout != acemq.ReplicatedLayout {
		return nil, "", fmt.Errorf("in %s, layout %q is not a layout; use classic or replicated", path, f.Layout)
	}
	if len(f.Exchanges)+len(f.Queues)+len(f.Bindings) == 0 {
		return nil, "", fmt.Errorf("the topology file %s declares nothing; add exchanges, queues or bindings (see `acemq topology --help`)", path)
	}
	t := acemq.NewTopology()
	for _, e := range f.Exchanges {
		kind := acemq.ExchangeKind(strings.ToLower(e.Type))
		switch kind {
		case acemq.Direct, acemq.Topic, acemq.Fanout, acemq.Headers:
		case "":
			kind = acemq.Direct
		default:
			return nil, "", fmt.Errorf("in %s, exchange %q has type %q; use direct, topic, fanout or headers", path, e.Name, e.Type)
		}
		t.Exchange(e.Name, kind, acemq.ExchangeOptions{})
	}
	for _, q := range f.Queues {
		var opts acemq.QueueOptions
		switch strings.ToLower(q.Type) {
		case "", "quorum":
		case "classic":
			opts.Type = acemq.Classic
		case "stream":
			opts.Type = acemq.Stream
		default:
			return nil, "", fmt.Errorf("in %s, queue %q has type %q; use quorum, classic or stream", path, q.Name, q.Type)
		}
		if q.DeliveryLimit > 0 {
			opts.DeliveryLimit = q.DeliveryLimit
		}
		t.Queue(q.Name, opts)
		if q.DeadLetters {
			t.DeadLetters(q.Name)
		}
		if q.Retry != nil {
			p, err := q.Retry.policy(q.Name)
			if err != nil {
				return nil, "", fmt.Errorf("in %s, %w", path, err)
			}
			t.Retries(q.Name, p)
		}
	}
	for _, b := range f.Bindings {
		t.Bind(b.Queue, b.Exchange, b.Key)
	}
	if err := t.Validate(); err != nil {
		return nil, "", fmt.Errorf("the topology in %s cannot be declared: %s; fix the file and run plan again", path, strings.TrimSuffix(sentence(err), "."))
	}
	return t, layout, nil
}

func newTopology() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topology",
		Short: "Compare a topology file with the broker (plan) or declare it (apply)",
		Long: "Topology as data: exchanges, queues with dead-lettering and retry policy, and bindings, in YAML.\n\n" +
			topologyExample,
		Example: `  acemq topology plan -f topology.yaml
  acemq topology apply -f topology.yaml --url amqp://guest:guest@localhost:5672/`,
	}
	cmd.AddCommand(newTopologyPlan(), newTopologyApply())
	return cmd
}

func newTopologyPlan() *cobra.Command {
	var u, file string
	cmd := &cobra.Command{
		Use:   "plan -f topology.yaml",
		Short: "Print, per declaration, would create / matches / differs against the broker",
		Long: "Plan changes nothing. Each exchange and queue is checked passively: missing ones would be created, " +
			"identical ones match, and ones the broker holds with other settings differ (with the broker's text). " +
			"AMQP cannot report bindings, so they show as unknown; apply declares them (idempotent). " +
			"Then one line per queue with a retry policy says where its waits are held on this broker: in the queue " +
			"(RabbitMQ 4.3's delayed retry, waits: queue or where-supported) or on rungs. " +
			"Exits 0 when nothing differs, 3 when something differs.",
		Example: `  acemq topology plan -f topology.yaml --url amqp://guest:guest@localhost:5672/`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withTopology(cmd, file, u, func(ctx context.Context, t *acemq.Topology, c *acemq.Conn) error {
				plan, err := c.Plan(ctx, t)
				if err != nil {
					return fmt.Errorf("cannot compare the topology with the broker (%s); check the connection and retry", strings.TrimSuffix(sentence(err), "."))
				}
				out := cmd.OutOrStdout()
				// The broker's texts and the names are shown by the safetext rule.
				fmt.Fprint(out, safetext.Block(plan.String()))
				counts := map[acemq.PlanStatus]int{}
				for _, it := range plan.Items {
					counts[it.Status]++
				}
				fmt.Fprintf(out, "plan: %d would create, %d match, %d differ, %d unknown\n",
					counts[acemq.WouldCreate], counts[acemq.Matches], counts[acemq.Differs], counts[acemq.Unknown])
				if counts[acemq.Differs] > 0 {
					return &exitCodeError{code: 3, msg: fmt.Sprintf("%d declaration(s) differ from what the broker holds; apply would fail on them, so change the file or delete those entities first", counts[acemq.Differs])}
				}
				return nil
			})
		},
	}
	urlFlag(cmd, &u)
	cmd.Flags().StringVarP(&file, "file", "f", "", "topology YAML file (- for stdin)")
	return cmd
}

func newTopologyApply() *cobra.Command {
	var u, file string
	cmd := &cobra.Command{
		Use:     "apply -f topology.yaml",
		Short:   "Declare the topology on the broker (idempotent)",
		Example: `  acemq topology apply -f topology.yaml --url amqp://guest:guest@localhost:5672/`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withTopology(cmd, file, u, func(ctx context.Context, t *acemq.Topology, c *acemq.Conn) error {
				if err := c.Apply(ctx, t); err != nil {
					return fmt.Errorf("the broker refused the topology (%s); run `acemq topology plan` to see what differs", strings.TrimSuffix(sentence(err), "."))
				}
				n := len(t.Declarations())
				fmt.Fprintf(cmd.OutOrStdout(), "applied: %d declarations\n", n)
				return nil
			})
		},
	}
	urlFlag(cmd, &u)
	cmd.Flags().StringVarP(&file, "file", "f", "", "topology YAML file (- for stdin)")
	return cmd
}

// withTopology loads the topology file, connects (bounded by a minute) and
// runs f; the connection is closed afterwards.
// The Conn has the file's layout, and says on stderr when it finds one of
// the library's queues in the other layout.
func withTopology(cmd *cobra.Command, file, url string, f func(ctx context.Context, t *acemq.Topology, c *acemq.Conn) error) error {
	t, layout, err := loadTopologyFile(file, cmd.InOrStdin())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
	defer cancel()
	warn := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := connect(ctx, url, "acemq-topology", acemq.Config{Layout: layout, Logger: warn})
	if err != nil {
		return err
	}
	defer closeConn(c)
	return f(ctx, t, c)
}
