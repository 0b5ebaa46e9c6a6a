// Command rpc shows request/reply: a responder prices quotes, a requester
// asks for eight prices at once, one quote the responder cannot price comes
// back as a ResponderError (and lands in the .dlq), and a request to a
// queue nobody serves times out. It runs on the in-process broker; -url
// runs it against RabbitMQ. It exits 0 only if every number is right.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/rpc"
)

type quote struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

type price struct {
	SKU   string `json:"sku"`
	Cents int    `json:"cents"`
}

func main() {
	url := flag.String("url", "memory://example-rpc", "broker URL (memory://name or amqp://…)")
	flag.Parse()
	if err := run(*url); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
}

func run(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())

	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	queue, silent := "example.prices."+suffix, "example.nobody."+suffix
	if err := c.Apply(ctx, acemq.NewTopology().Queue(queue, acemq.QueueOptions{Type: acemq.Classic}).Queue(silent, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		return err
	}
	defer func() {
		for _, q := range []string{queue, acemq.DeadLetterQueue(queue), acemq.ParkedQueue(queue), silent} {
			_, _ = c.DeleteQueue(context.Background(), q)
		}
	}()

	responder, err := rpc.Respond(ctx, c, queue, func(ctx context.Context, m *acemq.Message[quote]) (price, error) {
		if m.Payload.SKU == "unknown" {
			return price{}, errors.New("no price list has SKU unknown")
		}
		return price{SKU: m.Payload.SKU, Cents: 250 * m.Payload.Qty}, nil
	}, acemq.ConsumerConfig{Prefetch: 8, Concurrency: 4})
	if err != nil {
		return err
	}
	defer responder.Close(context.Background())

	r, err := rpc.NewRequester(ctx, c)
	if err != nil {
		return err
	}
	defer r.Close(context.Background())
	fmt.Printf("requester listens on %s\n", r.ReplyQueue())

	var wg sync.WaitGroup
	answers := make([]price, 8)
	errs := make([]error, 8)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = rpc.Request[quote, price](ctx, r, "", queue, quote{SKU: fmt.Sprintf("sku-%d", i), Qty: i + 1})
		}()
	}
	wg.Wait()
	right := 0
	for i, a := range answers {
		if errs[i] == nil && a.SKU == fmt.Sprintf("sku-%d", i) && a.Cents == 250*(i+1) {
			right++
		}
	}
	fmt.Printf("8 concurrent requests: %d answered with their own price\n", right)
	if right != 8 {
		return fmt.Errorf("%d of 8 requests got their own answer (%v)", right, errors.Join(errs...))
	}

	_, err = rpc.Request[quote, price](ctx, r, "", queue, quote{SKU: "unknown", Qty: 1})
	var re *rpc.ResponderError
	if !errors.As(err, &re) {
		return fmt.Errorf("want a ResponderError, got %v", err)
	}
	fmt.Printf("error reply: %q\n", re.Text)

	_, err = rpc.Request[quote, price](ctx, r, "", silent, quote{SKU: "sku-0", Qty: 1}, rpc.Timeout(300*time.Millisecond))
	if !errors.Is(err, rpc.ErrRequestTimedOut) {
		return fmt.Errorf("want a timeout, got %v", err)
	}
	fmt.Println("unserved queue:", err)

	// The error reply is sent before the request is rejected; closing the
	// responder drains it, so the rejection has landed when Close returns.
	if err := responder.Close(ctx); err != nil {
		return err
	}
	info, err := c.QueueInfo(ctx, acemq.DeadLetterQueue(queue))
	if err != nil {
		return err
	}
	fmt.Printf("%s holds %d failed request(s)\n", acemq.DeadLetterQueue(queue), info.Messages)
	if info.Messages != 1 {
		return fmt.Errorf("want 1 request in the DLQ, found %d", info.Messages)
	}
	fmt.Println("OK")
	return nil
}
