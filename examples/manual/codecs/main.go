// Command codecs is the program of docs/codecs.md: publishers writing
// JSON, YAML and XML to one queue, a consumer reading them all by content
// type, and a body no codec claims parked with the reason.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/codec/xml"
	"github.com/acemq-go/acemq/codec/yaml" // a module of its own: go get github.com/acemq-go/acemq/codec/yaml
)

type Order struct {
	ID    string `json:"id" yaml:"id" xml:"id"`
	Cents int    `json:"cents" yaml:"cents" xml:"cents"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, "memory://shop", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{}).DeadLetters("orders")); err != nil {
		log.Fatal(err)
	}

	// Reads with the first member that claims the content type; writes
	// with the first (JSON).
	readAll := acemq.Composite(acemq.JSON(), yaml.New(), xml.New())
	got := make(chan string, 3)
	cons, err := acemq.Consume(ctx, c, "orders", func(ctx context.Context, m *acemq.Message[Order]) acemq.Decision {
		got <- fmt.Sprintf("%s %d cents, from %s", m.Payload.ID, m.Payload.Cents, m.ContentType)
		return acemq.Accept()
	}, acemq.ConsumerConfig{Codec: readAll})
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close(ctx)

	for i, codec := range []acemq.Codec{acemq.JSON(), yaml.New(), xml.New()} {
		pub := acemq.NewPublisher[Order](c, "", "orders", acemq.PublisherConfig{Codec: codec})
		if _, err := pub.Send(ctx, Order{ID: fmt.Sprintf("o-%d", i+1), Cents: 100 * (i + 1)}); err != nil {
			log.Fatal(err)
		}
	}
	for range 3 {
		fmt.Println(<-got)
	}

	// CSV: no member claims it, so the message is parked, body kept byte
	// for byte, and the handler never runs.
	raw := acemq.RawMessage{RoutingKey: "orders", ContentType: "text/csv", Body: []byte("o-4,400\n")}
	if err := c.PublishRaw(ctx, raw); err != nil {
		log.Fatal(err)
	}
	puller, err := c.NewPuller(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer puller.Close()
	for ctx.Err() == nil {
		m, ok, err := puller.Pull(ctx, acemq.ParkedQueue("orders"))
		if err != nil {
			log.Fatal(err)
		}
		if ok {
			fmt.Printf("parked %q: %s\n", m.Body, m.Envelope.Error)
			if err := m.Ack(); err != nil {
				log.Fatal(err)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	log.Fatal("nothing was parked")
}
