package rabbitmq_test

import (
	"context"
	"log"

	"github.com/acemq-go/acemq"
)

// The transport is chosen by the URL's scheme (amqp, amqps), and its two
// settings ride on the URL: frames=amqp091 leaves publishing and confirms
// to amqp091-go instead of the connection this package owns, and
// coalesce=off writes every publish straight to the socket. Any other
// value is refused when connecting. Most services set neither.
func Example() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "amqp://guest:guest@localhost:5672/?frames=amqp091&coalesce=off", acemq.Config{})
	if err != nil {
		log.Fatal(err) // the broker is unreachable, or a setting is misspelt
	}
	defer c.Close(ctx)
}
