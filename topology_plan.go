package acemq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/acemq-go/acemq/transport"
)

// bindingsUnknown is the Unknown detail for every binding in a plan.
const bindingsUnknown = "AMQP cannot report bindings; apply declares it (idempotent)"

// declareOnce declares d (passively when passive is set) on a fresh
// channel and closes the channel afterwards, since a refused declaration
// closes the channel it was made on.
func declareOnce(ctx context.Context, open channelOpener, d Declaration, passive bool) error {
	dc := declarer{open: open}
	defer dc.close()
	return dc.declare(ctx, d, passive)
}

// brokerText is the broker's reply text carried by err, or err's text.
func brokerText(err error) string {
	var e *transport.Error
	if errors.As(err, &e) && e.Reason != "" {
		return e.Reason
	}
	return err.Error()
}

// String renders the plan, one line per item:
// "{declaration}: {status}" plus ": {detail}" when there is one, then one
// line per Retries entry (PlanRetry.String).
func (p Plan) String() string {
	var b strings.Builder
	for _, it := range p.Items {
		b.WriteString(describeDecl(it.Declaration) + ": " + string(it.Status))
		if it.Detail != "" {
			b.WriteString(": " + it.Detail)
		}
		b.WriteString("\n")
		if it.Warning != "" {
			b.WriteString("  warning: " + it.Warning + "\n")
		}
	}
	for _, r := range p.Retries {
		b.WriteString(r.String() + "\n")
	}
	return b.String()
}

// channelOpener opens a fresh throwaway channel.
type channelOpener func(ctx context.Context) (transport.Channel, error)

// PlanStatus is the result of comparing one declaration with the broker.
type PlanStatus string

// Plan statuses.
const (
	WouldCreate PlanStatus = "would create"
	Matches     PlanStatus = "matches"
	Differs     PlanStatus = "differs"
	Unknown     PlanStatus = "unknown"
)

// PlanItem is one line of a plan.
type PlanItem struct {
	Declaration Declaration
	Status      PlanStatus
	// Detail is the broker's text for Differs, or the explanation for Unknown.
	Detail string
	// Warning is a risk in the declaration itself, whatever the broker
	// holds (a quorum source queue with neither a delivery limit nor
	// dead-letter wiring); empty when there is none.
	Warning string
}

// Plan compares a topology with the broker.
type Plan struct {
	Items []PlanItem
	// Retries says, per Topology.Retries call, where the queue's retry
	// waits are held on this broker (in the queue, with RabbitMQ 4.3's
	// delayed retry, or on rungs) and why.
	Retries []PlanRetry
}

// planDeclarations compares each declaration with the broker: passive check
// → would create; identical re-declare on a throwaway channel → matches,
// 406 → differs. Bindings are unknown.
func planDeclarations(ctx context.Context, open channelOpener, decls []Declaration) (Plan, error) {
	plan := Plan{Items: make([]PlanItem, 0, len(decls))}
	for _, d := range decls {
		if err := ctx.Err(); err != nil {
			return plan, err
		}
		if d.Kind == DeclBinding {
			plan.Items = append(plan.Items, PlanItem{Declaration: d, Status: Unknown, Detail: bindingsUnknown})
			continue
		}
		err := declareOnce(ctx, open, d, true)
		switch {
		case transport.Code(err) == transport.CodeNotFound:
			plan.Items = append(plan.Items, PlanItem{Declaration: d, Status: WouldCreate})
			continue
		case err != nil:
			return plan, fmt.Errorf("acemq: cannot check %s on the broker: %w", describeDecl(d), err)
		}
		err = declareOnce(ctx, open, d, false)
		switch {
		case err == nil:
			plan.Items = append(plan.Items, PlanItem{Declaration: d, Status: Matches})
		case transport.Code(err) == transport.CodePreconditionFailed:
			plan.Items = append(plan.Items, PlanItem{Declaration: d, Status: Differs, Detail: brokerText(err)})
		default:
			return plan, fmt.Errorf("acemq: cannot compare %s with the broker: %w", describeDecl(d), err)
		}
	}
	for i := range plan.Items {
		plan.Items[i].Warning = planWarning(plan.Items[i].Declaration)
	}
	return plan, nil
}

// applyDeclarations declares each entity (exchanges, then queues, then
// bindings) on one short-lived channel, a fresh one after a refusal,
// stopping at the first refusal with an error naming the entity and
// the broker's text, unless tolerate (when not nil) accepts the refusal.
// It returns what it declared, without the tolerated refusals.
func applyDeclarations(ctx context.Context, open channelOpener, decls []Declaration, tolerate func(context.Context, Declaration, error) bool) ([]Declaration, error) {
	if problems := entityProblems(decls); len(problems) > 0 {
		return nil, &TopologyError{Problems: problems}
	}
	dc := declarer{open: open}
	defer dc.close()
	declared := make([]Declaration, 0, len(decls))
	for _, kind := range []DeclKind{DeclExchange, DeclQueue, DeclBinding} {
		for _, d := range decls {
			if d.Kind != kind {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := dc.declare(ctx, d, false); err != nil {
				if tolerate != nil && tolerate(ctx, d, err) {
					continue
				}
				return nil, fmt.Errorf("acemq: the broker refused to declare %s: %w", describeDecl(d), err)
			}
			declared = append(declared, d)
		}
	}
	return declared, nil
}

// joinWarnings joins two plan warnings, either of which may be empty.
func joinWarnings(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
