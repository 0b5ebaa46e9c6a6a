package memory_test

import (
	"context"
	"fmt"

	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/memory"
)

// A test of code above the transport can make the broker refuse the next
// publish and watch what the code does about it.
func ExampleBroker_NackNext() {
	ctx := context.Background()
	defer memory.Delete("example")
	conn, _, err := memory.Driver{}.Dial(ctx, transport.Config{URL: "memory://example"})
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel(ctx)
	_, _ = ch.DeclareQueue(ctx, transport.QueueSpec{Name: "orders", Durable: true})
	pub, _ := conn.Publisher(ctx, true)

	memory.Lookup("example").NackNext(1)
	for range 2 {
		answer := make(chan transport.Confirmation, 1)
		_ = pub.Publish(ctx, &transport.Message{RoutingKey: "orders", Body: []byte("{}")},
			func(c transport.Confirmation) { answer <- c })
		fmt.Println((<-answer).Outcome)
	}
	info, _ := memory.Lookup("example").QueueInfo("orders")
	fmt.Println(info.Messages, "ready")
	// Output:
	// nacked
	// acked
	// 1 ready
}
