package acemq_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/memory"
)

// A seam is a transport wrapped by the test: the engine dials it as
// "seam+memory://…" or "seam+amqp://…", and every confirmed publish the
// engine hands to the transport passes through it. It records what was
// written, in the order the engine wrote it, and counts the publishes the
// engine is still waiting on (written, and their confirmation not yet
// handed back). It holds the broker's answers back until every message
// written has been answered and at least `release` are outstanding, then
// hands them all to the engine: so the count of outstanding publishes
// climbs as far as the engine lets it, and nothing about the broker's
// speed decides it. The engine's own code is untouched: the seam is what
// a transport registered with transport.Register would be.
type seam struct {
	release int
	// fault, when set, may replace one write (by its position among the
	// writes) before it reaches the broker.
	fault func(seq int, m *transport.Message) *transport.Message

	mu      sync.Mutex
	written []transport.Message // what the engine wrote, in order
	out     int                 // written, answer not yet handed to the engine
	max     int                 // the most out ever was
	held    []heldAnswer
}

type heldAnswer struct {
	cf   transport.Confirmation
	done transport.ConfirmFunc
}

var seams sync.Map // id → *seam

func init() {
	transport.Register("seam+memory", seamDriver{"memory"})
	transport.Register("seam+amqp", seamDriver{"amqp"})
}

// seamRig connects a rig through a new seam, on memory:// or on the
// RabbitMQ node of `make test`, with opts.
func seamRig(t *testing.T, rabbit bool, s *seam, opts ...acemq.Config) *rig {
	t.Helper()
	id := itoa(brokerSeq.Add(1))
	seams.Store(id, s)
	t.Cleanup(func() { seams.Delete(id) })
	if !rabbit {
		name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())) + "-" + id
		r := &rig{t: t, name: name, url: "seam+memory://" + name + "?seam=" + id}
		t.Cleanup(func() { memory.Delete(name) })
		r.connect(opts)
		r.broker = memory.Lookup(name)
		return r
	}
	u, err := url.Parse(testenv.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Scheme = "seam+" + u.Scheme
	q := u.Query()
	q.Set("seam", id)
	u.RawQuery = q.Encode()
	r := &rig{t: t, url: u.String(), rabbit: true}
	t.Cleanup(func() {
		var names []string
		for _, q := range r.made {
			names = append(names, q, q+".dlq", q+".parked")
		}
		if len(names) > 0 {
			deleteQueues(t, names...)
		}
	})
	r.connect(opts)
	return r
}

// writes returns a copy of what was written so far.
func (s *seam) writes() []transport.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]transport.Message(nil), s.written...)
}

// most is the largest number of publishes ever outstanding at once.
func (s *seam) most() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

func (s *seam) publish(ctx context.Context, p transport.Publisher, msg *transport.Message, done transport.ConfirmFunc) error {
	if done == nil {
		return p.Publish(ctx, msg, nil)
	}
	s.mu.Lock()
	seq := len(s.written)
	s.written = append(s.written, *msg)
	s.out++
	s.max = max(s.max, s.out)
	fault := s.fault
	s.mu.Unlock()
	m := msg
	if fault != nil {
		m = fault(seq, msg)
	}
	err := p.Publish(ctx, m, func(cf transport.Confirmation) { s.answered(cf, done) })
	if err != nil && errors.Is(err, transport.ErrNotWritten) {
		s.mu.Lock()
		s.out--
		s.mu.Unlock()
	}
	return err
}

// answered holds the broker's answer; once every outstanding publish is
// answered and at least release are outstanding, it hands them all to the
// engine (on the transport's goroutine, as a transport would).
func (s *seam) answered(cf transport.Confirmation, done transport.ConfirmFunc) {
	s.mu.Lock()
	s.held = append(s.held, heldAnswer{cf, done})
	var give []heldAnswer
	if len(s.held) == s.out && s.out >= s.release {
		give, s.held = s.held, nil
		s.out = 0
	}
	s.mu.Unlock()
	for _, h := range give {
		h.done(h.cf)
	}
}

type seamDriver struct{ under string }

func (d seamDriver) driver() transport.Driver {
	u, ok := transport.Lookup(d.under)
	if !ok {
		panic("no transport for " + d.under)
	}
	return u
}

func (d seamDriver) Name() string           { return d.driver().Name() }
func (d seamDriver) Capabilities() []string { return d.driver().Capabilities() }

func (d seamDriver) Dial(ctx context.Context, cfg transport.Config) (transport.Connection, int, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, 0, err
	}
	q := u.Query()
	v, ok := seams.Load(q.Get("seam"))
	if !ok {
		return nil, 0, errors.New("seam: no seam " + q.Get("seam"))
	}
	q.Del("seam")
	u.RawQuery = q.Encode()
	u.Scheme = d.under
	cfg.URL = u.String()
	conn, i, err := d.driver().Dial(ctx, cfg)
	if err != nil {
		return nil, i, err
	}
	return &seamConn{Connection: conn, s: v.(*seam)}, i, nil
}

// seamConn passes everything through but publishing channels, keeping
// the optional interfaces the engine looks for on a connection.
type seamConn struct {
	transport.Connection
	s *seam
}

func (c *seamConn) Publisher(ctx context.Context, confirm bool) (transport.Publisher, error) {
	p, err := c.Connection.Publisher(ctx, confirm)
	if err != nil {
		return nil, err
	}
	return &seamPub{Publisher: p, s: c.s}, nil
}

func (c *seamConn) Hold(deadline time.Time) {
	if h, ok := c.Connection.(transport.Holder); ok {
		h.Hold(deadline)
	}
}

func (c *seamConn) Release(ctx context.Context, deadline time.Time) error {
	if h, ok := c.Connection.(transport.Holder); ok {
		return h.Release(ctx, deadline)
	}
	return nil
}

func (c *seamConn) CloseWithin(d time.Duration) error {
	return transport.CloseWithin(c.Connection, d)
}

type seamPub struct {
	transport.Publisher
	s *seam
}

func (p *seamPub) Publish(ctx context.Context, msg *transport.Message, done transport.ConfirmFunc) error {
	return p.s.publish(ctx, p.Publisher, msg, done)
}
