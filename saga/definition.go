package saga

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Call is what an action or a compensation is given: the instance, the
// step, the subject the instance was started with, and the idempotency
// key, "<instance id>/<step name>", the same on every attempt of this
// step's action (and of its compensation), so the effect can be recorded
// once whatever the number of attempts.
type Call struct {
	InstanceID  string
	Saga        string
	Step        string
	Subject     []byte
	ContentType string
	// IdempotencyKey is "<InstanceID>/<Step>". Record it in the same
	// transaction as the effect and skip the effect when it is there; a
	// compensation should record it under a prefix of its own (say
	// "undo:" + key) so it is told apart from the action's.
	IdempotencyKey string
	// Attempt counts the runs of this step, its action's and then its
	// compensation's together, from 1 (a compensation after one action
	// run is attempt 2); a second run of the same call means an earlier
	// one may have had its effect.
	Attempt int
	// Uncertain is set on the compensation of the step whose action
	// failed, when that action may have taken effect all the same: it
	// timed out (Step.Timeout), or an earlier attempt of it was
	// interrupted (a crash, a lost lease, an abandoned run) before its end
	// was recorded. Such a step is compensated as a done one is; its
	// compensation must cope with finding nothing to undo. Never set for
	// a TxAction step: an interrupted or timed-out TxAction rolled back.
	Uncertain bool
}

// Func is an action or a compensation. A non-nil error (or a panic) from
// an action starts compensation; from a compensation it leaves the
// instance unresolved.
type Func func(ctx context.Context, c Call) error

// TxFunc is an action or a compensation that runs inside the database
// transaction recording its step's end (done, or compensated): what it
// writes through tx (an outbox.Store.Add, say) commits with the
// transition or not at all, so it takes effect exactly once without
// checking the idempotency key. It must not commit or roll back tx. An
// error or a panic rolls tx back and counts as a failure.
type TxFunc func(ctx context.Context, tx *sql.Tx, c Call) error

// Step is one step of a saga: its name (unique within the saga), its
// action (Action, or TxAction to run inside the transition's transaction)
// and an optional compensation (Compensate or TxCompensate; neither:
// nothing to undo, recorded as no_compensation).
type Step struct {
	Name         string
	Action       Func
	Compensate   Func
	TxAction     TxFunc
	TxCompensate TxFunc
	// Timeout bounds one call of the action or of the compensation
	// (0: the runner's, WithStepTimeout, default DefaultStepTimeout).
	// When it passes the call's context is cancelled and the call counts
	// as failed (see WithStepTimeout).
	Timeout time.Duration
}

// Definition is a validated saga: a name and ordered steps. It is
// immutable and safe for concurrent use.
type Definition struct {
	name  string
	steps []Step
	index map[string]int
}

// Define validates and returns a saga definition: a non-empty name, at
// least one step, each with a non-empty name and an action, names unique.
// It fails (never panics) with an error naming what is wrong.
func Define(name string, steps ...Step) (*Definition, error) {
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("acemq: a saga needs a name; pass saga.Define(\"order\", ...)")
	}
	if len(name) > 255 {
		return nil, fmt.Errorf("acemq: saga name %.40q... is %d bytes; the acemq_saga table holds names of up to 255", name, len(name))
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("acemq: saga %q has no steps; give it at least one saga.Step", name)
	}
	d := &Definition{name: name, steps: append([]Step(nil), steps...), index: map[string]int{}}
	for i, s := range steps {
		if strings.TrimSpace(s.Name) == "" {
			return nil, fmt.Errorf("acemq: step %d of saga %q has no name; name every step", i+1, name)
		}
		if len(s.Name) > 255 {
			return nil, fmt.Errorf("acemq: step %.40q... of saga %q is %d bytes; step names hold up to 255", s.Name, name, len(s.Name))
		}
		if (s.Action == nil) == (s.TxAction == nil) {
			if s.Action != nil {
				return nil, fmt.Errorf("acemq: step %q of saga %q has both Action and TxAction; set one", s.Name, name)
			}
			return nil, fmt.Errorf("acemq: step %q of saga %q has no action; set Step.Action (or Step.TxAction)", s.Name, name)
		}
		if s.Compensate != nil && s.TxCompensate != nil {
			return nil, fmt.Errorf("acemq: step %q of saga %q has both Compensate and TxCompensate; set one", s.Name, name)
		}
		if s.Timeout < 0 {
			return nil, fmt.Errorf("acemq: step %q of saga %q has a negative Timeout %v; give a positive one, or 0 for the runner's", s.Name, name, s.Timeout)
		}
		if j, dup := d.index[s.Name]; dup {
			return nil, fmt.Errorf("acemq: saga %q names two steps %q (steps %d and %d); step names must be unique", name, s.Name, j+1, i+1)
		}
		d.index[s.Name] = i
	}
	return d, nil
}

// Name returns the saga's name.
func (d *Definition) Name() string { return d.name }

// Steps returns the names of the steps, in order.
func (d *Definition) Steps() []string {
	out := make([]string, len(d.steps))
	for i, s := range d.steps {
		out[i] = s.Name
	}
	return out
}
