// Command deadletters is the program of docs/dead-letters.md: messages set
// aside with their reason, read in code, replayed after a fix, and a
// dead-letter queue consumed to an archive.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync/atomic"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/replay"
)

type Order struct {
	ID  string `json:"id"`
	SKU string `json:"sku"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, "memory://shop", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	err = c.Apply(ctx, acemq.NewTopology().Queue("orders.new", acemq.QueueOptions{}).DeadLetters("orders.new"))
	if err != nil {
		log.Fatal(err)
	}

	// 1. A handler that cannot handle two of the orders yet.
	var fixed atomic.Bool
	var handled atomic.Int32
	cons, err := acemq.Consume(ctx, c, "orders.new", func(ctx context.Context, m *acemq.Message[Order]) acemq.Decision {
		switch {
		case m.Payload.SKU == "" && !fixed.Load():
			return acemq.Reject(errors.New("no SKU"))
		case m.Payload.SKU == "gift-card":
			return acemq.Retry(errors.New("the gift-card service is down"))
		}
		handled.Add(1)
		return acemq.Accept()
	}, acemq.ConsumerConfig{Retry: acemq.Fixed(2, 50*time.Millisecond)})
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close(ctx)
	for _, o := range []Order{{"o-1", "book"}, {"o-2", ""}, {"o-3", "gift-card"}} {
		if _, err := c.Publish(ctx, "", "orders.new", o, acemq.SendOptions{}); err != nil {
			log.Fatal(err)
		}
	}
	dlq := acemq.DeadLetterQueue("orders.new") // "orders.new.dlq"
	for {
		if info, err := c.QueueInfo(ctx, dlq); err != nil {
			log.Fatal(err)
		} else if info.Messages == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	// 2. Read them without taking them: the envelope says why and when.
	// On RabbitMQ pass replay.ManagementAPI("http://guest:guest@localhost:15672/", "/"),
	// so that Browse can tell whether a read counts toward a delivery limit.
	_, err = replay.Browse(ctx, c, dlq, 100, func(m *acemq.Pulled) bool {
		e := m.Envelope
		fmt.Printf("%s: %s (attempt %d, first seen %s)\n", e.ID[:8], e.Error, e.Attempt, e.FirstSeen.Format(time.RFC3339))
		return true
	})
	if err != nil {
		log.Fatal(err)
	}

	// 3. The SKU bug is fixed: replay those, attempt reset to 1, reason cleared.
	fixed.Store(true)
	report, err := replay.Queue(ctx, c, dlq, replay.Filter(func(e acemq.Envelope, body []byte) bool {
		return strings.HasPrefix(e.Error, "the handler rejected it: no SKU")
	}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replay:", report) // moved 1, skipped 1 (drained)

	// 4. Archive what is left: a consumer of the dead-letter queue itself.
	// NoDeadLetterDeclaration: a .dlq has no .dlq.dlq or .dlq.parked of its own,
	// so this handler only accepts (or Release()s to keep a message).
	archived := make(chan string, 1)
	archive, err := acemq.Consume(ctx, c, dlq, func(ctx context.Context, m *acemq.Message[Order]) acemq.Decision {
		archived <- fmt.Sprintf("%s: %q after %d attempts", m.Payload.ID, m.Envelope.Error, m.Envelope.Attempt)
		return acemq.Accept()
	}, acemq.ConsumerConfig{NoDeadLetterDeclaration: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("archived", <-archived)
	if err := archive.Close(ctx); err != nil {
		log.Fatal(err)
	}
	for _, q := range []string{acemq.DeadLetterQueue(dlq), acemq.ParkedQueue(dlq)} {
		if _, err := c.QueueInfo(ctx, q); err == nil {
			log.Fatalf("%s was declared", q) // it is not: NoDeadLetterDeclaration
		}
	}
	for handled.Load() < 2 { // o-1, and o-2 after the replay
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("handled: o-1, o-2")
}
