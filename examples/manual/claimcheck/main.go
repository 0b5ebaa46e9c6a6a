// Command claimcheck is the program of docs/claim-check.md: a body of a
// mebibyte goes to a store and travels as a key of a few dozen bytes.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/claimcheck"
)

type Report struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A directory every producer and consumer can read; NewSQLStore(db,
	// dialect) keeps the bodies in a table instead.
	dir, err := os.MkdirTemp("", "claims")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := claimcheck.NewFileStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	// Bodies of 64 KiB or more go to the store; smaller ones travel inline.
	// With encryption, wrap the encrypting codec: claimcheck.New(enc, store).
	codec, err := claimcheck.New(acemq.JSON(), store)
	if err != nil {
		log.Fatal(err)
	}

	c, err := acemq.Connect(ctx, "memory://reports", acemq.Config{Codec: codec})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("reports", acemq.QueueOptions{}).DeadLetters("reports")); err != nil {
		log.Fatal(err)
	}
	got := make(chan string, 1)
	cons, err := acemq.Consume(ctx, c, "reports", func(ctx context.Context, m *acemq.Message[Report]) acemq.Decision {
		key, _ := claimcheck.KeyOf(m.Body)
		got <- fmt.Sprintf("%s: %d bytes read from a %d-byte message (store key %s)", m.Payload.Name, len(m.Payload.Text), len(m.Body), key)
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close(ctx)

	pub := acemq.NewPublisher[Report](c, "", "reports", acemq.PublisherConfig{})
	if _, err := pub.Send(ctx, Report{Name: "sales-2026", Text: strings.Repeat("x", 1<<20)}); err != nil {
		log.Fatal(err) // a store that fails fails the send: nothing was published
	}
	fmt.Println(<-got)

	// The codec never deletes a body: a message may be redelivered, set
	// aside and replayed long after. Prune only what is older than every
	// queue, dead-letter queue and replay window can hold.
	pruned, err := claimcheck.Prune(ctx, store, 30*24*time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pruned", pruned)
}
