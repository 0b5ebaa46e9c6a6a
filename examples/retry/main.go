// Command retry is the second journey: what happens to a message the
// handler cannot handle. A payment gateway fails twice and then recovers
// (the retry ladder gets the message through on attempt 3); a card that is
// always declined exhausts its attempts and lands in {queue}.dlq; an
// invalid request is rejected at once with acemq.Fatal; a message a person
// must look at is parked in {queue}.parked. Every set-aside copy carries
// the reason in x-acemq-error. It runs with nothing installed (memory://)
// or against RabbitMQ:
//
//	go run ./examples/retry
//	go run ./examples/retry -url amqp://guest:guest@127.0.0.1:5672/
//
// (or set ACEMQ_URL). It exits 0 only if each message ended where the
// comments say, with its reason and attempt.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
)

// Payment is the message.
type Payment struct {
	Card  string `json:"card"`
	Cents int    `json:"cents"`
}

func main() {
	url := flag.String("url", env("ACEMQ_URL", "memory://retry"), "broker URL (memory://name or amqp://…)")
	flag.Parse()
	if err := run(*url); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The settlement hook reports what the engine did with each delivery.
	settled := make(chan acemq.Settlement, 64)
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler), OnSettlement: func(s acemq.Settlement) { settled <- s }})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())

	queue := "example.payments." + time.Now().Format("150405.000000")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(queue, acemq.QueueOptions{}).DeadLetters(queue)); err != nil {
		return err
	}
	dlq, parked := acemq.DeadLetterQueue(queue), acemq.ParkedQueue(queue)
	defer func() {
		for _, q := range []string{queue, dlq, parked} {
			_, _ = c.DeleteQueue(context.Background(), q)
		}
	}()

	var mu sync.Mutex
	gatewayCalls := 0
	cons, err := acemq.Consume(ctx, c, queue, func(ctx context.Context, m *acemq.Message[Payment]) acemq.Decision {
		switch m.Payload.Card {
		case "flaky-gateway":
			mu.Lock()
			gatewayCalls++
			n := gatewayCalls
			mu.Unlock()
			if n < 3 {
				return acemq.Retry(fmt.Errorf("payment gateway timed out (call %d)", n))
			}
			return acemq.Accept()
		case "declined":
			return acemq.Retry(errors.New("card declined"))
		case "":
			return acemq.Retry(acemq.Fatal(errors.New("no card number: retrying cannot help")))
		default:
			return acemq.Park(errors.New("amount over the fraud limit: a person must approve it"))
		}
	}, acemq.
		// Three attempts in all, 50 ms apart. Waits of 30 s or more would be
		// held on broker TTL queues ({queue}.retry.{delay}) instead.
		ConsumerConfig{Retry: acemq.Fixed(3, 50*time.Millisecond)})
	if err != nil {
		return err
	}
	pub := acemq.NewPublisher[Payment](c, "", queue, acemq.PublisherConfig{})
	if _, err := pub.SendAll(ctx, []Payment{
		{Card: "flaky-gateway", Cents: 1000},
		{Card: "declined", Cents: 2000},
		{Card: "", Cents: 3000},
		{Card: "4111", Cents: 9_999_999},
	}); err != nil {
		return err
	}
	// 2 retries + 1 accept, 2 retries + 1 dead letter, 1 dead letter, 1 park.
	final := map[acemq.Outcome]int{}
	for seen := 0; seen < 8; seen++ {
		select {
		case s := <-settled:
			fmt.Printf("attempt %d: %-13s %s %s\n", s.Envelope.Attempt, s.Outcome, s.Target, s.Reason)
			final[s.Outcome]++
		case <-ctx.Done():
			return fmt.Errorf("only %d settlements in time: %v", seen, final)
		}
	}
	if err := cons.Close(ctx); err != nil {
		return err
	}
	if final["retried"] != 4 || final["acked"] != 1 || final["dead_lettered"]+final["rejected"] != 2 || final["parked"] != 1 {
		return fmt.Errorf("unexpected outcomes: %v", final)
	}

	// The set-aside copies, with their reasons, are where a person finds them.
	reasons, err := drain(ctx, c, dlq, 2)
	if err != nil {
		return err
	}
	for _, want := range []string{"card declined", "no card number"} {
		if !containsReason(reasons, want) {
			return fmt.Errorf("%s holds %q, want a copy whose reason mentions %q", dlq, reasons, want)
		}
	}
	parkedReasons, err := drain(ctx, c, parked, 1)
	if err != nil {
		return err
	}
	if !containsReason(parkedReasons, "fraud limit") {
		return fmt.Errorf("%s holds %q, want the parked payment", parked, parkedReasons)
	}
	fmt.Printf("%s: %q\n%s: %q\n", dlq, reasons, parked, parkedReasons)
	fmt.Println("OK")
	return nil
}

// drain takes want messages from q and returns their x-acemq-error
// reasons "(attempt N) reason".
func drain(ctx context.Context, c *acemq.Conn, q string, want int) ([]string, error) {
	p, err := c.NewPuller(ctx)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	var reasons []string
	for len(reasons) < want {
		m, ok, err := p.Pull(ctx, q)
		if err != nil {
			return reasons, err
		}
		if !ok { // a set-aside copy can take a moment to be counted in
			select {
			case <-ctx.Done():
				return reasons, fmt.Errorf("%s holds %d messages, want %d", q, len(reasons), want)
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		reasons = append(reasons, fmt.Sprintf("(attempt %d) %s", m.Envelope.Attempt, m.Envelope.Error))
		if err := m.Ack(); err != nil {
			return reasons, err
		}
	}
	return reasons, nil
}

func containsReason(reasons []string, part string) bool {
	for _, r := range reasons {
		if strings.Contains(r, part) {
			return true
		}
	}
	return false
}
