package rabbitmq

import (
	"context"
	"sync"
	"testing"

	"github.com/acemq-go/acemq/transport"
)

// A settlement that races the channel's Close must never reach the broker
// after the channel.close frame: RabbitMQ answers a frame on a closed
// channel with a connection-level 504 CHANNEL_ERROR, which would take every
// other channel of the connection (every consumer, every publisher) down
// with it. Here many deliveries are nacked while their channel closes; the
// connection must survive every round.
func TestASettlementRacingCloseNeverKillsTheConnection(t *testing.T) {
	c := dial(t, transport.Config{})
	q := tempQueue(t, c, "rabbit.settle-close", nil)
	p := openPublisher(t, c)
	for round := 0; round < 40; round++ {
		for i := 0; i < 20; i++ {
			if got := confirmOne(t, p, &transport.Message{RoutingKey: q, Body: []byte("x")}); got.Outcome != transport.Acked {
				t.Fatalf("publish: %+v", got)
			}
		}
		ch, err := c.Channel(context.Background())
		if err != nil {
			t.Fatalf("round %d: channel: %v (the connection died in an earlier round?)", round, err)
		}
		if err := ch.Qos(20); err != nil {
			t.Fatal(err)
		}
		deliveries, err := ch.Consume(context.Background(), transport.ConsumeSpec{Queue: q, Tag: "settle-close"})
		if err != nil {
			t.Fatal(err)
		}
		var tags []uint64
		for len(tags) < 20 {
			d, ok := <-deliveries
			if !ok {
				t.Fatalf("round %d: the delivery channel closed", round)
			}
			tags = append(tags, d.DeliveryTag)
		}
		var wg sync.WaitGroup
		for _, tag := range tags {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = ch.Nack(tag, true) // refused or written: never after the close
			}()
		}
		_ = ch.Close()
		wg.Wait()
		select {
		case <-c.Done():
			t.Fatalf("round %d: a settlement after the channel's close killed the connection: %v", round, c.Err())
		default:
		}
	}
}
