// Command streams is the program of docs/streams.md: an order history in
// a stream, read into a total from the first offset, checkpointed, and
// read again after a restart from where the checkpoint says.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/stream"
)

type OrderPlaced struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, "memory://shop", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	// A stream keeps every message; readers choose where to start.
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders.history", acemq.QueueOptions{Type: acemq.Stream})); err != nil {
		log.Fatal(err)
	}
	publish := func(ids ...string) {
		for _, id := range ids {
			if _, err := c.Publish(ctx, "", "orders.history", OrderPlaced{ID: id, Cents: 1000}, acemq.SendOptions{}); err != nil {
				log.Fatal(err)
			}
		}
	}
	publish("o-1", "o-2", "o-3")

	// Checkpoints survive a reader's restart; stream.NewSQLCheckpoints(db,
	// dialect) survives the process too.
	checkpoints := &stream.MemoryCheckpoints{}
	read := func(until int64) {
		total := 0
		done := make(chan struct{})
		r, err := stream.Read(ctx, c, "orders.history", "revenue",
			func(ctx context.Context, m *stream.Message[OrderPlaced]) acemq.Decision {
				total += m.Payload.Cents // one message at a time, in offset order
				fmt.Printf("offset %d: %s\n", m.Offset, m.Payload.ID)
				if m.Offset == until {
					close(done)
				}
				return acemq.Accept()
			},
			stream.From(stream.First()),                      // with no checkpoint yet
			stream.Checkpoint(checkpoints, 100, time.Second), // saved every 100 messages, every second, and on Close
		)
		if err != nil {
			log.Fatal(err) // stream.ErrCheckpointTaken: another reader took this name
		}
		<-done
		if err := r.Close(ctx); err != nil {
			log.Fatal(err)
		}
		offset, ok := r.Checkpointed() // (offset, true) once a save went through
		fmt.Printf("read %d cents; checkpoint at offset %d (%v)\n", total, offset, ok)
	}
	read(2)
	publish("o-4", "o-5")
	read(4) // starts after the checkpoint: o-4 and o-5 only
}
