// Command encryption shows payload encryption and the claim check
// together: an order with a 1 MiB scanned invoice is encrypted and, being
// over 64 KiB, put in a claim-check store, so the broker carries a short
// framed key and the store holds only ciphertext. The keys are then
// rotated; an order under the old key still reads, and one under a key the
// consumer never had is parked with the key id in its reason. It runs on
// the in-process broker; -url runs it against RabbitMQ. It exits 0 only if
// every check holds.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/claimcheck"
	"github.com/acemq-go/acemq/crypto"
)

type order struct {
	ID      string `json:"id"`
	Invoice []byte `json:"invoice"`
}

func main() {
	url := flag.String("url", "memory://example-encryption", "broker URL (memory://name or amqp://…)")
	flag.Parse()
	if err := run(*url); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
}

func run(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	parked := make(chan acemq.Settlement, 4)
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler), OnSettlement: func(s acemq.Settlement) {
		if s.Outcome == acemq.ConsumeParked {
			parked <- s
		}
	}})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())

	// Keys would come from crypto.KeyFromEnv / KeyFromFile / a KeyProvider;
	// fixed bytes keep the example self-contained.
	ring, err := crypto.NewKeyring(crypto.Key{ID: "2026-01", Secret: bytes.Repeat([]byte{1}, 32)})
	if err != nil {
		return err
	}
	enc, err := crypto.NewCodec(acemq.JSON(), ring)
	if err != nil {
		return err
	}
	// The claim check wraps the encryption: the store sees only ciphertext.
	store := claimcheck.NewMemoryStore()
	codec, err := claimcheck.New(enc, store)
	if err != nil {
		return err
	}

	q := fmt.Sprintf("example.invoices.%d", time.Now().UnixNano())
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		return err
	}
	defer func() {
		for _, name := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
			_, _ = c.DeleteQueue(context.Background(), name)
		}
	}()

	type received struct {
		order    order
		wire     int
		keyID    string
		claimKey string
	}
	got := make(chan received, 4)
	k, err := acemq.Consume(ctx, c, q, func(_ context.Context, m *acemq.Message[order]) acemq.Decision {
		key, _ := claimcheck.KeyOf(m.Body)
		stored, _, _ := store.Get(context.Background(), key)
		id, _ := crypto.KeyIDOf(stored)
		got <- received{m.Payload, len(m.Body), id, key}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Codec: codec})
	if err != nil {
		return err
	}
	defer k.Close(context.Background())
	pub := acemq.NewPublisher[order](c, "", q, acemq.PublisherConfig{Codec: codec})

	invoice := bytes.Repeat([]byte("%PDF scanned invoice "), (1<<20)/21+1)
	if _, err := pub.Send(ctx, order{ID: "o-1", Invoice: invoice}); err != nil {
		return err
	}
	r, err := receive(ctx, got)
	if err != nil {
		return err
	}
	stored, _, _ := store.Get(ctx, r.claimKey)
	fmt.Printf("o-1: %d-byte invoice sent as a %d-byte message; the store holds %d bytes of ciphertext under key id %s\n",
		len(r.order.Invoice), r.wire, len(stored), r.keyID)
	if !bytes.Equal(r.order.Invoice, invoice) || r.wire >= 100 || r.keyID != "2026-01" || bytes.Contains(stored, []byte("invoice")) {
		return errors.New("o-1 did not cross as a short, encrypted claim check")
	}

	// Rotate: new orders go out under 2026-02; 2026-01 still decrypts.
	if err := ring.Rotate(crypto.Key{ID: "2026-02", Secret: bytes.Repeat([]byte{2}, 32)}); err != nil {
		return err
	}
	if _, err := pub.Send(ctx, order{ID: "o-2", Invoice: invoice}); err != nil {
		return err
	}
	if r, err = receive(ctx, got); err != nil {
		return err
	}
	fmt.Printf("o-2: after rotation, encrypted under key id %s\n", r.keyID)
	if r.order.ID != "o-2" || r.keyID != "2026-02" {
		return errors.New("o-2 was not encrypted under the rotated key")
	}

	// A publisher with a key this consumer does not hold: parked, not lost.
	foreign, _ := crypto.NewKeyring(crypto.Key{ID: "partner-7", Secret: bytes.Repeat([]byte{7}, 32)})
	foreignEnc, _ := crypto.NewCodec(acemq.JSON(), foreign)
	foreignCodec, _ := claimcheck.New(foreignEnc, store)
	if _, err := acemq.NewPublisher[order](c, "", q, acemq.PublisherConfig{Codec: foreignCodec}).Send(ctx, order{ID: "o-3"}); err != nil {
		return err
	}
	select {
	case s := <-parked:
		fmt.Printf("o-3: parked in %s: %s\n", s.Target, s.Reason)
		if !strings.Contains(s.Reason, `key id "partner-7", which is not in the keyring`) {
			return errors.New("o-3's reason does not name its key id")
		}
	case <-ctx.Done():
		return errors.New("o-3 was not parked")
	}
	fmt.Println("OK")
	return nil
}

func receive[T any](ctx context.Context, ch <-chan T) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		var zero T
		return zero, errors.New("a message did not arrive in time")
	}
}
