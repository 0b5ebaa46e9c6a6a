package acemq

import (
	"context"
	"errors"
	"strings"

	"github.com/acemq-go/acemq/transport"
)

// bindingsUnknown is the Unknown detail for every binding in a plan.
const bindingsUnknown = "AMQP cannot report bindings; apply declares it (idempotent)"

// declareOnce declares d (passively when passive is set) on a fresh
// channel and closes the channel afterwards, since a refused declaration
// closes the channel it was made on.
func declareOnce(ctx context.Context, open ChannelOpener, d Declaration, passive bool) error {
	ch, err := open(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	switch d.Kind {
	case DeclExchange:
		spec := d.Exchange
		spec.Passive = passive
		return ch.DeclareExchange(ctx, spec)
	case DeclQueue:
		spec := d.Queue
		spec.Passive = passive
		_, err := ch.DeclareQueue(ctx, spec)
		return err
	case DeclBinding:
		return ch.BindQueue(ctx, d.Binding)
	}
	return errors.New("acemq: unknown declaration kind")
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
// "{declaration}: {status}" plus ": {detail}" when there is one.
func (p Plan) String() string {
	var b strings.Builder
	for _, it := range p.Items {
		b.WriteString(describeDecl(it.Declaration) + ": " + string(it.Status))
		if it.Detail != "" {
			b.WriteString(": " + it.Detail)
		}
		b.WriteString("\n")
	}
	return b.String()
}
