// Command retries is the program of docs/retries-and-dead-letters.md: a
// retry policy, its waits in the consumer and on a broker rung, and the
// reasons a message leaves the ladder with.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/acemq-go/acemq"
)

type Payment struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

var errBankBusy = errors.New("the bank is busy")

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Four attempts in all: waits of 250 ms, 500 ms, then 1 s. A wait of
	// 1 s or more is held on a broker rung (payments.retry.1s), not in
	// this process; the default threshold is 30 s.
	policy := acemq.Exponential(4, 250*time.Millisecond, time.Second).WaitInBrokerFrom(time.Second)
	fmt.Println("policy:", policy, "waits:", policy.Schedule(), "on the broker:", policy.BrokerDelays())

	c, err := acemq.Connect(ctx, "memory://bank", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	err = c.Apply(ctx, acemq.NewTopology().
		Queue("payments", acemq.QueueOptions{}).DeadLetters("payments").
		Retries("payments", policy)) // the rung; Consume would declare it too
	if err != nil {
		log.Fatal(err)
	}

	settled := make(chan string, 16)
	handler := func(ctx context.Context, m *acemq.Message[Payment]) acemq.Decision {
		p := m.Payload
		switch {
		case p.Cents <= 0:
			// Fatal: retrying cannot help, so payments.dlq at once.
			return acemq.Retry(acemq.Fatal(errors.New("amount " + strconv.Itoa(p.Cents))))
		case p.ID == "p-2" && m.Envelope.Attempt < 4:
			return acemq.Retry(errBankBusy) // succeeds at the fourth attempt
		case p.ID == "p-3":
			return acemq.Retry(errBankBusy) // never succeeds: payments.dlq after 4 attempts
		}
		settled <- fmt.Sprintf("%s paid at attempt %d", p.ID, m.Envelope.Attempt)
		return acemq.Accept()
	}
	cons, err := acemq.Consume(ctx, c, "payments", handler, acemq.ConsumerConfig{Retry: policy, Concurrency: 3, Prefetch: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close(ctx)

	for _, p := range []Payment{{"p-1", 100}, {"p-2", 200}, {"p-3", 300}, {"p-4", 0}} {
		if _, err := c.Publish(ctx, "", "payments", p, acemq.SendOptions{}); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(<-settled)
	fmt.Println(<-settled)

	// What left the ladder, and why: x-acemq-error on each copy.
	puller, err := c.NewPuller(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer puller.Close()
	for seen := 0; seen < 2; {
		m, ok, err := puller.Pull(ctx, acemq.DeadLetterQueue("payments"))
		if err != nil {
			log.Fatal(err)
		}
		if !ok {
			time.Sleep(20 * time.Millisecond) // p-3 is still on the ladder
			continue
		}
		fmt.Printf("payments.dlq: attempt %d, %s\n", m.Envelope.Attempt, m.Envelope.Error)
		if err := m.Ack(); err != nil {
			log.Fatal(err)
		}
		seen++
	}
}
