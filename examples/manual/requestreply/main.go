// Command requestreply is the program of docs/request-reply.md: a
// responder on a queue, a requester that waits for its answer, and the
// errors a request can end with.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/rpc"
)

type Quote struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

type Price struct {
	Cents int `json:"cents"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, "memory://shop", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	err = c.Apply(ctx, acemq.NewTopology().Queue("pricing", acemq.QueueOptions{}).DeadLetters("pricing"))
	if err != nil {
		log.Fatal(err)
	}

	// The responder: a consumer whose handler returns the reply, or an
	// error that goes back to the requester (and the request to pricing.dlq).
	responder, err := rpc.Respond(ctx, c, "pricing", func(ctx context.Context, m *acemq.Message[Quote]) (Price, error) {
		if m.Payload.Qty <= 0 {
			return Price{}, errors.New("a quantity must be positive")
		}
		return Price{Cents: 250 * m.Payload.Qty}, nil
	}, acemq.ConsumerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer responder.Close(ctx)

	// The requester owns a private reply queue; one per process is enough.
	r, err := rpc.NewRequester(ctx, c, rpc.WithTimeout(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close(ctx)

	// Mandatory: a request no queue takes fails at once, instead of
	// waiting out the timeout.
	mandatory := rpc.WithSendOptions(acemq.SendOptions{Mandatory: true})

	price, err := rpc.Request[Quote, Price](ctx, r, "", "pricing", Quote{SKU: "book", Qty: 3}, mandatory)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("3 books cost", price.Cents)

	_, err = rpc.Request[Quote, Price](ctx, r, "", "pricing", Quote{SKU: "book"}, mandatory)
	var re *rpc.ResponderError
	if errors.As(err, &re) {
		fmt.Println("the responder said:", re.Text)
	}

	_, err = rpc.Request[Quote, Price](ctx, r, "", "no-such-queue", Quote{SKU: "book", Qty: 1}, mandatory)
	switch {
	case acemq.IsUnroutable(err):
		fmt.Println("no responder's queue: unroutable")
	case errors.Is(err, rpc.ErrRequestTimedOut):
		fmt.Println("no reply in time; the request may still have arrived")
	case err != nil:
		log.Fatal(err)
	}
}
