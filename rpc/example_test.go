package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/rpc"
)

// A responder doubles numbers on the queue "double"; a Requester asks it,
// and an error the responder returns comes back as a *rpc.ResponderError.
func ExampleRequest() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-rpc", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("double", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		panic(err)
	}
	responder, err := rpc.Respond(ctx, c, "double", func(ctx context.Context, m *acemq.Message[int]) (int, error) {
		if m.Payload < 0 {
			return 0, errors.New("only positive numbers")
		}
		return 2 * m.Payload, nil
	}, acemq.ConsumerConfig{})
	if err != nil {
		panic(err)
	}
	defer responder.Close(ctx)

	r, err := rpc.NewRequester(ctx, c)
	if err != nil {
		panic(err)
	}
	defer r.Close(ctx)
	answer, err := rpc.Request[int, int](ctx, r, "", "double", 21)
	fmt.Println(answer, err)
	_, err = rpc.Request[int, int](ctx, r, "", "double", -1)
	var re *rpc.ResponderError
	fmt.Println(errors.As(err, &re))
	// Output:
	// 42 <nil>
	// true
}
