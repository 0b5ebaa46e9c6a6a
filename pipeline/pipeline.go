// Package pipeline runs a message through a declared chain of steps, each
// a consumer of its own queue (behaviour §7.6, contract §3.8), and offers
// Then, the one-hop form: a handler whose result goes to a fixed next
// destination.
//
// A pipeline named p with steps a, b, c declares a direct exchange p and
// quorum queues p.a, p.b, p.c bound on keys a, b, c. Send starts a run:
// the message goes to p.a with the route headers x-acemq-route = "a,b,c",
// x-acemq-route-position = 0 and a fresh x-acemq-route-id. Each step's
// output goes on to the next step's queue (same route id, position + 1,
// fresh message id, correlation kept, causation = the incoming id), and
// the incoming message is accepted only once that hop is confirmed. The
// wire form is Java AceMQ's, so Java, Python and Ruby steps can share a
// pipeline with Go ones.
//
// Step types are checked when the pipeline is built: each step's output
// type must be the next step's input type.
//
// The manual's page on pipelines: https://github.com/acemq-go/acemq/blob/main/docs/pipelines.md
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/group"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Outcomes of a run, the outcome tag of the run metrics and event.
const (
	Completed  = "completed"
	EndedEarly = "ended_early"
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.\-]*$`)

// StepFunc is one step's work: it returns the output for the next step
// and whether the run goes on. continue=false ends the run early (the
// message is accepted, nothing is published); an error sends the message
// through the step's retry policy (wrap it with acemq.Fatal to set it
// aside at once). The last step's output is dropped: its run is complete.
type StepFunc[In, Out any] func(ctx context.Context, m *acemq.Message[In]) (out Out, cont bool, err error)

// Step is one declared step; make it with NewStep.
type Step struct {
	name    string
	in, out reflect.Type
	cfg     stepConfig
	// start consumes the step's queue; set by NewStep, it closes over the
	// step's types.
	start func(ctx context.Context, c *acemq.Conn, p *Pipeline, i int) (*group.Group, error)
}

type stepConfig struct {
	consumers int
	codec     acemq.Codec
	policy    *acemq.RetryPolicy
	opts      acemq.ConsumerConfig
}

// StepOption adjusts one step.
type StepOption func(*stepConfig)

// Consumers runs n competing consumers on the step's queue (a consumer
// group, default 1). n below 1 is refused when the pipeline starts.
func Consumers(n int) StepOption { return func(c *stepConfig) { c.consumers = n } }

// StepRetry is the step's retry policy (default: the consumer default).
func StepRetry(p acemq.RetryPolicy) StepOption { return func(c *stepConfig) { c.policy = &p } }

// StepCodec decodes the step's input, and encodes what the step before it
// sends here (default: the Conn's codec).
func StepCodec(codec acemq.Codec) StepOption { return func(c *stepConfig) { c.codec = codec } }

// StepConsumerOptions gives each of the step's consumers these settings
// (prefetch, concurrency, interceptors …); StepCodec and StepRetry
// override its Codec and Retry.
func StepConsumerOptions(cfg acemq.ConsumerConfig) StepOption {
	return func(c *stepConfig) { c.opts = cfg }
}

// NewStep declares a step named name running f on values of type In and
// producing values of type Out for the next step.
func NewStep[In, Out any](name string, f StepFunc[In, Out], opts ...StepOption) Step {
	s := Step{
		name: name,
		in:   reflect.TypeFor[In](),
		out:  reflect.TypeFor[Out](),
		cfg:  stepConfig{consumers: 1},
	}
	for _, o := range opts {
		o(&s.cfg)
	}
	cfg := s.cfg
	s.start = func(ctx context.Context, c *acemq.Conn, p *Pipeline, i int) (*group.Group, error) {
		h := func(ctx context.Context, m *acemq.Message[In]) acemq.Decision {
			if f == nil {
				return acemq.Reject(acemq.Fatal(fmt.Errorf("acemq: pipeline %q step %q has no function; give NewStep one", p.name, name)))
			}
			out, cont, err := f(ctx, m)
			if err != nil {
				return acemq.Retry(err)
			}
			return p.after(ctx, c, i, m.Envelope, out, cont)
		}
		o := cfg.opts
		if cfg.codec != nil {
			o.Codec = cfg.codec
		}
		if cfg.policy != nil {
			o.Retry = *cfg.policy
		}
		return group.Consume(ctx, c, p.Queue(name), cfg.consumers, h, o)
	}
	return s
}

// Name is the step's name.
func (s Step) Name() string { return s.name }

// Pipeline is a checked, declared chain of steps. It is immutable and
// safe for concurrent use.
type Pipeline struct {
	name  string
	steps []Step
	route []string
	// metrics is set on the copy Start runs.
	metrics instruments
}

// New checks and builds the pipeline name from steps. It refuses, with a
// sentence saying what to change, a name or step name outside
// ^[A-Za-z0-9][A-Za-z0-9.\-]*$, no step, a repeated step name, and a step
// whose output type is not the next step's input type.
func New(name string, steps ...Step) (*Pipeline, error) {
	if !namePattern.MatchString(name) {
		return nil, fmt.Errorf("acemq: pipeline name %q does not match ^[A-Za-z0-9][A-Za-z0-9.\\-]*$; use letters, digits, '.' and '-', starting with a letter or digit", name)
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("acemq: pipeline %q has no step; give New at least one", name)
	}
	seen := map[string]bool{}
	route := make([]string, len(steps))
	for i, s := range steps {
		if s.start == nil {
			return nil, fmt.Errorf("acemq: pipeline %q step %d was not made with NewStep; declare steps with pipeline.NewStep", name, i+1)
		}
		if !namePattern.MatchString(s.name) {
			return nil, fmt.Errorf("acemq: pipeline %q step name %q does not match ^[A-Za-z0-9][A-Za-z0-9.\\-]*$; use letters, digits, '.' and '-', starting with a letter or digit", name, s.name)
		}
		if seen[s.name] {
			return nil, fmt.Errorf("acemq: pipeline %q names step %q twice; give each step its own name", name, s.name)
		}
		seen[s.name] = true
		if i > 0 && steps[i-1].out != s.in {
			prev := steps[i-1]
			return nil, fmt.Errorf("acemq: pipeline %q cannot chain step %q into step %q: %q produces %s but %q takes %s; make the types match",
				name, prev.name, s.name, prev.name, prev.out, s.name, s.in)
		}
		route[i] = s.name
	}
	return &Pipeline{name: name, steps: append([]Step(nil), steps...), route: route}, nil
}

// Name is the pipeline's name, also its exchange.
func (p *Pipeline) Name() string { return p.name }

// Steps returns the step names in order.
func (p *Pipeline) Steps() []string { return append([]string(nil), p.route...) }

// Queue is the queue of the named step: {pipeline}.{step}.
func (p *Pipeline) Queue(step string) string { return p.name + "." + step }

// Topology declares the pipeline (contract §3.8): the direct exchange
// {pipeline} and, per step, the quorum queue {pipeline}.{step} bound on
// {step}. Consumers declare each queue's dead-letter half when they start.
func (p *Pipeline) Topology() *acemq.Topology {
	t := acemq.NewTopology().Exchange(p.name, acemq.Direct, acemq.ExchangeOptions{})
	for _, s := range p.route {
		t.Queue(p.Queue(s), acemq.QueueOptions{Type: acemq.Quorum}).Bind(p.Queue(s), p.name, s)
	}
	return t
}

// Send starts a run: payload (which must be of the first step's input
// type) goes to the first step with the route headers, a fresh route id,
// mandatory and confirmed. o holds the Conn's send options (a codec is
// the first step's unless given; an envelope given in o.Envelope gets the
// route set on it). The error is the publish error, or a refusal of a
// payload of the wrong type.
func (p *Pipeline) Send(ctx context.Context, c *acemq.Conn, payload any, o acemq.SendOptions) (acemq.Sent, error) {
	first := p.steps[0]
	if got := reflect.TypeOf(payload); got != first.in {
		return acemq.Sent{}, fmt.Errorf("acemq: pipeline %q step %q takes %s, not %v; send a %s", p.name, first.name, first.in, got, first.in)
	}
	env := acemq.NewEnvelope()
	if o.Envelope != nil {
		env = *o.Envelope
	}
	env.Route = p.Steps()
	env.RoutePosition = 0
	env.RouteID = acemq.NewEnvelope().ID
	o.Envelope, o.Mandatory = &env, true
	if o.Codec == nil {
		o.Codec = first.cfg.codec
	}
	return c.Publish(ctx, p.name, first.name, payload, o)
}

// Running is a started pipeline: the consumer groups of its steps.
type Running struct {
	p      *Pipeline
	groups []*group.Group
}

// Start starts the consumers of every step (apply Topology first). If one
// step cannot start, those started are closed and the error names the
// step. The returned Running is closed with Close.
func (p *Pipeline) Start(ctx context.Context, c *acemq.Conn) (*Running, error) {
	m := meters(c)
	r := &Running{p: p}
	pc := *p
	pc.metrics = m
	for i, s := range p.steps {
		if s.cfg.consumers < 1 {
			err := fmt.Errorf("acemq: pipeline %q step %q asks for %d consumers; give Consumers 1 or more", p.name, s.name, s.cfg.consumers)
			return nil, errors.Join(err, r.Close(ctx))
		}
		g, err := s.start(ctx, c, &pc, i)
		if err != nil {
			err = fmt.Errorf("acemq: pipeline %q step %q cannot start: %w", p.name, s.name, err)
			return nil, errors.Join(err, r.Close(ctx))
		}
		r.groups = append(r.groups, g)
	}
	return r, nil
}

// Groups returns the steps' consumer groups, in step order.
func (r *Running) Groups() []*group.Group { return append([]*group.Group(nil), r.groups...) }

// Close drains every step's consumers at the same time under ctx's
// deadline and joins their errors. Safe to call more than once.
func (r *Running) Close(ctx context.Context) error {
	errs := make([]error, len(r.groups))
	done := make(chan struct{}, len(r.groups))
	for i, g := range r.groups {
		go func() { errs[i] = g.Close(ctx); done <- struct{}{} }()
	}
	for range r.groups {
		<-done
	}
	return errors.Join(errs...)
}

// after settles a step that returned without error: end the run, or
// publish the output to the next step and accept once it is confirmed.
func (p *Pipeline) after(ctx context.Context, c *acemq.Conn, i int, in acemq.Envelope, out any, cont bool) acemq.Decision {
	step := p.route[i]
	if !cont {
		p.finished(ctx, c, step, EndedEarly, in)
		return acemq.Accept()
	}
	pos := i
	if pos+1 >= len(p.route) {
		p.finished(ctx, c, step, Completed, in)
		return acemq.Accept()
	}
	next := p.steps[pos+1]
	env := in.CausedBy(in)
	env.Origin = c.Config().Origin
	env.Type = ""
	for name := range env.Headers() {
		if brokerOwned(name) {
			env = env.WithoutHeader(name)
		}
	}
	env.Route = p.Steps()
	env.RoutePosition = pos + 1
	env.RouteID = in.RouteID
	if env.RouteID == "" {
		env.RouteID = acemq.NewEnvelope().ID
	}
	o := acemq.SendOptions{Envelope: &env, Mandatory: true, Codec: next.cfg.codec}
	if _, err := c.Publish(ctx, p.name, next.name, out, o); err != nil {
		return acemq.Retry(fmt.Errorf("acemq: pipeline %q could not hand step %q's output to step %q: %w", p.name, step, next.name, err))
	}
	return acemq.Accept()
}

// EventRunFinished is the kind of the event a pipeline raises on the
// Conn's event handler (acemq.Config.OnEvent) when a run ends, completed or
// ended early (behaviour §7.6). Event.Fields holds pipeline, step, outcome
// (completed or ended_early) and route_id.
const EventRunFinished acemq.EventKind = "pipeline.run_finished"

func (p *Pipeline) finished(ctx context.Context, c *acemq.Conn, step, outcome string, in acemq.Envelope) {
	age := time.Duration(0)
	if !in.FirstSeen.IsZero() {
		age = max(time.Since(in.FirstSeen), 0)
	}
	attrs := metric.WithAttributes(attribute.String("pipeline", p.name), attribute.String("step", step), attribute.String("outcome", outcome))
	if p.metrics.total != nil {
		p.metrics.total.Add(ctx, 1, attrs)
		p.metrics.duration.Record(ctx, age.Seconds(), attrs)
	}
	c.Emit(acemq.Event{Kind: EventRunFinished, Fields: map[string]string{
		"pipeline": p.name, "step": step, "outcome": outcome, "route_id": in.RouteID,
	}})
}

// brokerOwned reports headers the broker sets; they are never copied onto
// a hop (contract §1.3).
func brokerOwned(name string) bool {
	return name == "x-death" || name == "x-delivery-count" || name == "x-acquired-count" || name == "x-stream-offset" ||
		strings.HasPrefix(name, "x-first-death-") || strings.HasPrefix(name, "x-last-death-")
}

type instruments struct {
	total    metric.Int64Counter
	duration metric.Float64Histogram
}

func meters(c *acemq.Conn) instruments {
	m := c.Config().MeterProvider.Meter(acemq.InstrumentationScope)
	// The API returns a working no-op instrument alongside any error.
	total, _ := m.Int64Counter("acemq.pipeline.run.total", metric.WithUnit("{run}"), metric.WithDescription("Pipeline runs finished, by outcome."))
	duration, _ := m.Float64Histogram("acemq.pipeline.run.duration", metric.WithUnit("s"), metric.WithDescription("Age of a pipeline run's envelope when the run finished."))
	return instruments{total: total, duration: duration}
}
