// Package slip carries a message through an itinerary of steps, each a
// service of its own (behaviour §7.5, contract §3.8).
//
// Two forms of itinerary exist on the wire, and a follower reads both:
//
//   - the itinerary slip, the JSON header acemq-routing-slip that the Go,
//     Python and Ruby AceMQ libraries write: steps still to do (steps[0] is
//     this message's step) and done, oldest first, each an exchange and a
//     routing key;
//   - the route headers of a declared pipeline (Java's form):
//     x-acemq-route lists the step names, x-acemq-route-position is the
//     index of this message's step, and every step is published to the
//     exchange the message arrived on with the step's name as the key.
//
// A message goes on in the form it arrived in. Each hop is a new message
// (fresh id, the correlation kept, causation = the incoming id) with the
// same body, content type and application headers; it is mandatory and
// confirmed, and the incoming message is accepted only after the hop is
// confirmed, so a crash in between repeats a step but never skips one:
// steps must be idempotent.
//
// The manual's page on routing slips: https://github.com/acemq-go/acemq/blob/main/docs/routing-slips.md
package slip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/header"
)

// Header is the header that carries an itinerary slip.
const Header = header.RoutingSlip

// Step is one stop on an itinerary: the exchange and routing key to
// publish to, and an optional name. CompletedAt is set on the steps in
// Slip.Done, to the second, in UTC.
type Step struct {
	Exchange    string
	RoutingKey  string
	Name        string
	CompletedAt time.Time
}

// To returns a step that publishes to exchange with routingKey, named
// name (which may be empty).
func To(exchange, routingKey, name string) Step {
	return Step{Exchange: exchange, RoutingKey: routingKey, Name: name}
}

// Slip is an itinerary: the steps still to do (Steps[0] is the step the
// message is on its way to) and those done, oldest first.
type Slip struct {
	Steps []Step
	Done  []Step
}

// New returns a slip of steps, none done. It returns an error when there
// is no step or a step has no routing key.
func New(steps ...Step) (Slip, error) {
	s := Slip{Steps: append([]Step(nil), steps...)}
	if err := s.validate(); err != nil {
		return Slip{}, err
	}
	return s, nil
}

func (s Slip) validate() error {
	if len(s.Steps) == 0 {
		return errors.New("acemq: the routing slip has no step to go to; give it at least one step")
	}
	for i, st := range append(append([]Step(nil), s.Steps...), s.Done...) {
		if st.RoutingKey == "" && st.Exchange == "" {
			return fmt.Errorf("acemq: step %d of the routing slip has neither an exchange nor a routing key; give every step a destination", i+1)
		}
		if !utf8.ValidString(st.Exchange) || !utf8.ValidString(st.RoutingKey) || !utf8.ValidString(st.Name) {
			return fmt.Errorf("acemq: step %d of the routing slip is not UTF-8 text", i+1)
		}
	}
	return nil
}

// wireStep is a step as the contract spells it: key order exchange,
// routingKey, name, completedAt, absent keys omitted.
type wireStep struct {
	Exchange    string `json:"exchange"`
	RoutingKey  string `json:"routingKey"`
	Name        string `json:"name,omitempty"`
	CompletedAt string `json:"completedAt,omitempty"`
}

type wireSlip struct {
	Steps []wireStep `json:"steps"`
	Done  []wireStep `json:"done,omitempty"`
}

// completedAtLayout is second-precision UTC (contract §3.8).
const completedAtLayout = "2006-01-02T15:04:05Z"

func toWire(steps []Step) []wireStep {
	if len(steps) == 0 {
		return nil
	}
	out := make([]wireStep, len(steps))
	for i, s := range steps {
		out[i] = wireStep{Exchange: s.Exchange, RoutingKey: s.RoutingKey, Name: s.Name}
		if !s.CompletedAt.IsZero() {
			out[i].CompletedAt = s.CompletedAt.UTC().Truncate(time.Second).Format(completedAtLayout)
		}
	}
	return out
}

// MarshalJSON writes the contract's JSON form (§3.8): key order exchange,
// routingKey, name, completedAt; an empty name, an unset completedAt and
// an empty done are omitted.
func (s Slip) MarshalJSON() ([]byte, error) {
	w := wireSlip{Steps: toWire(s.Steps), Done: toWire(s.Done)}
	if w.Steps == nil {
		w.Steps = []wireStep{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// maxSlipBytes bounds the header a follower parses; an itinerary is a few
// hundred bytes.
const maxSlipBytes = 1 << 20

// Parse reads the JSON form. Unknown keys are ignored; a slip with no
// step, a step without a destination, or a completedAt that is not an
// RFC 3339 time is an error saying what is wrong.
func Parse(data []byte) (Slip, error) {
	if len(data) > maxSlipBytes {
		return Slip{}, fmt.Errorf("acemq: the routing slip is %d bytes, more than the %d a slip may have", len(data), maxSlipBytes)
	}
	var w struct {
		Steps []wireStep `json:"steps"`
		Done  []wireStep `json:"done"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return Slip{}, fmt.Errorf("acemq: the routing slip is not the contract's JSON: %w", err)
	}
	from := func(ws []wireStep) ([]Step, error) {
		out := make([]Step, 0, len(ws))
		for _, x := range ws {
			st := Step{Exchange: x.Exchange, RoutingKey: x.RoutingKey, Name: x.Name}
			if x.CompletedAt != "" {
				t, err := time.Parse(time.RFC3339, x.CompletedAt)
				if err != nil {
					return nil, fmt.Errorf("acemq: the routing slip's completedAt %q is not an RFC 3339 time", x.CompletedAt)
				}
				st.CompletedAt = t.UTC()
			}
			out = append(out, st)
		}
		return out, nil
	}
	var s Slip
	var err error
	if s.Steps, err = from(w.Steps); err != nil {
		return Slip{}, err
	}
	if s.Done, err = from(w.Done); err != nil {
		return Slip{}, err
	}
	if len(s.Done) == 0 {
		s.Done = nil
	}
	if err := s.validate(); err != nil {
		return Slip{}, err
	}
	return s, nil
}

// Advance returns the slip after its first step was completed at t: that
// step moves to the end of Done with CompletedAt = t (to the second, UTC).
// The bool is false when no step is left, which ends the run.
func (s Slip) Advance(t time.Time) (Slip, bool) {
	if len(s.Steps) == 0 {
		return s, false
	}
	done := s.Steps[0]
	done.CompletedAt = t.UTC().Truncate(time.Second)
	next := Slip{
		Steps: append([]Step(nil), s.Steps[1:]...),
		Done:  append(append([]Step(nil), s.Done...), done),
	}
	return next, len(next.Steps) > 0
}

// Form names the itinerary form a message carries.
type Form int

const (
	// None: the message carries no itinerary.
	None Form = iota
	// JSONSlip: the acemq-routing-slip header.
	JSONSlip
	// RouteHeaders: a declared pipeline's x-acemq-route headers.
	RouteHeaders
)

// Of reads the itinerary a received envelope carries. A message with both
// forms is read by its slip header (the form the Go, Python and Ruby
// libraries write). A slip header that cannot be read is an error; so is
// a route whose position is past its end.
func Of(env acemq.Envelope) (Form, Slip, error) {
	if v, ok := env.Header(Header); ok {
		var raw []byte
		switch x := v.(type) {
		case string:
			raw = []byte(x)
		case []byte:
			raw = x
		default:
			return None, Slip{}, fmt.Errorf("acemq: the %s header is a %T, not JSON text", Header, v)
		}
		s, err := Parse(raw)
		if err != nil {
			return None, Slip{}, err
		}
		return JSONSlip, s, nil
	}
	if len(env.Route) > 0 {
		if env.RoutePosition >= len(env.Route) {
			return None, Slip{}, fmt.Errorf("acemq: the route position %d is past the route's %d steps (%s); the run had already finished", env.RoutePosition, len(env.Route), strings.Join(env.Route, ","))
		}
		return RouteHeaders, Slip{}, nil
	}
	return None, Slip{}, errors.New("acemq: the message carries no routing slip (no acemq-routing-slip header and no x-acemq-route); send it with slip.Start or through a declared pipeline")
}
