// Command encryption is the program of docs/encryption.md: bodies
// encrypted with AES-GCM under a key from the environment, a key rotated,
// and a message under a key the service does not hold parked.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/crypto"
)

type Invoice struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

// newKey makes a 32-byte AES-256 key. A service reads its keys instead
// (crypto.KeyFromEnv, KeyFromFile or LoadKeyring): a key made at start-up
// dies with the process, and so do the messages encrypted under it.
func newKey(id string) (crypto.Key, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return crypto.Key{}, err
	}
	return crypto.KeyFromBytes(id, secret)
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// ORDERS_KEY holds 64 hex digits (openssl rand -hex 32).
	key, err := crypto.KeyFromEnv("2026-12", "ORDERS_KEY", crypto.Hex)
	if err != nil {
		fmt.Println("no ORDERS_KEY, so a throwaway key:", err)
		if key, err = newKey("2026-12"); err != nil {
			log.Fatal(err)
		}
	}
	ring, err := crypto.NewKeyring(key) // the first key encrypts; every key decrypts
	if err != nil {
		log.Fatal(err)
	}
	codec, err := crypto.NewCodec(acemq.JSON(), ring) // content type application/vnd.acemq.encrypted
	if err != nil {
		log.Fatal(err)
	}

	// Config.Codec: every publisher and consumer of this Conn encrypts and
	// decrypts (PublisherConfig.Codec and ConsumerConfig.Codec for one).
	c, err := acemq.Connect(ctx, "memory://billing", acemq.Config{Codec: codec})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("invoices", acemq.QueueOptions{}).DeadLetters("invoices")); err != nil {
		log.Fatal(err)
	}
	got := make(chan string, 2)
	cons, err := acemq.Consume(ctx, c, "invoices", func(ctx context.Context, m *acemq.Message[Invoice]) acemq.Decision {
		id, err := crypto.KeyIDOf(m.Body) // read from the frame, without a key
		if err != nil {
			return acemq.Reject(acemq.Fatal(err))
		}
		got <- fmt.Sprintf("%s: %d cents, encrypted under key %s", m.Payload.ID, m.Payload.Cents, id)
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close(ctx)

	pub := acemq.NewPublisher[Invoice](c, "", "invoices", acemq.PublisherConfig{})
	if _, err := pub.Send(ctx, Invoice{ID: "i-1", Cents: 1999}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-got)

	// Rotate: new messages use the new key; the old one still decrypts.
	next, err := newKey("2027-01")
	if err != nil {
		log.Fatal(err)
	}
	if err := ring.Rotate(next); err != nil {
		log.Fatal(err)
	}
	if _, err := pub.Send(ctx, Invoice{ID: "i-2", Cents: 500}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-got)

	// A message under a key this ring does not hold is parked, never
	// retried: its reason names the key id, never a key or the plaintext.
	other, err := newKey("elsewhere")
	if err != nil {
		log.Fatal(err)
	}
	otherRing, err := crypto.NewKeyring(other)
	if err != nil {
		log.Fatal(err)
	}
	otherCodec, err := crypto.NewCodec(acemq.JSON(), otherRing)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Publish(ctx, "", "invoices", Invoice{ID: "i-3"}, acemq.SendOptions{Codec: otherCodec}); err != nil {
		log.Fatal(err)
	}
	puller, err := c.NewPuller(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer puller.Close()
	for {
		m, ok, err := puller.Pull(ctx, acemq.ParkedQueue("invoices"))
		if err != nil {
			log.Fatal(err)
		}
		if ok {
			fmt.Println("parked:", m.Envelope.Error)
			if err := m.Ack(); err != nil {
				log.Fatal(err)
			}
			break
		}
		if ctx.Err() != nil {
			log.Fatal(errors.New("nothing was parked"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
