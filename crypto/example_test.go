package crypto_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/crypto"
)

// A publisher and a consumer sharing a keyring: the body on the wire is
// ciphertext naming its key id, and the consumer reads the order back.
func ExampleNewCodec() {
	ctx := context.Background()
	// In production: crypto.KeyFromEnv("2026-01", "ORDERS_KEY", crypto.Base64).
	ring, _ := crypto.NewKeyring(crypto.Key{ID: "2026-01", Secret: bytes.Repeat([]byte{1}, 32)})
	codec, _ := crypto.NewCodec(acemq.JSON(), ring)

	c, _ := acemq.Connect(ctx, "memory://example-crypto", acemq.Config{Logger: slog.New(slog.DiscardHandler), Codec: codec})
	defer c.Close(ctx)
	_ = c.Apply(ctx, acemq.NewTopology().Queue("payments", acemq.QueueOptions{Type: acemq.Classic}))

	type payment struct{ Card string }
	got := make(chan string, 1)
	k, _ := acemq.Consume(ctx, c, "payments", func(_ context.Context, m *acemq.Message[payment]) acemq.Decision {
		id, _ := crypto.KeyIDOf(m.Body)
		got <- fmt.Sprintf("%s under key id %s, read as %s", m.ContentType, id, m.Payload.Card)
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	defer k.Close(ctx)
	_, _ = acemq.NewPublisher[payment](c, "", "payments", acemq.PublisherConfig{}).Send(ctx, payment{Card: "4111-1111"})
	fmt.Println(<-got)
	// Output: application/vnd.acemq.encrypted under key id 2026-01, read as 4111-1111
}

// Rotating keeps the old key for reading what was sent under it.
func ExampleKeyring_Rotate() {
	ring, _ := crypto.NewKeyring(crypto.Key{ID: "2026-01", Secret: bytes.Repeat([]byte{1}, 32)})
	old, _ := ring.Encrypt([]byte("sent in January"))
	_ = ring.Rotate(crypto.Key{ID: "2026-02", Secret: bytes.Repeat([]byte{2}, 32)})
	current, _ := ring.Current()
	plain, err := ring.Decrypt(context.Background(), old)
	fmt.Println(current, string(plain), err)
	// Output: 2026-02 sent in January <nil>
}
