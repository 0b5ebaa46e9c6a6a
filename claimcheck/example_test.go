package claimcheck_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/claimcheck"
	"github.com/acemq-go/acemq/crypto"
)

// A 1 MiB report crosses the broker as a short framed key; the claim check
// wraps the encryption, so the store holds only ciphertext.
func ExampleNew() {
	ctx := context.Background()
	ring, _ := crypto.NewKeyring(crypto.Key{ID: "2026-01", Secret: bytes.Repeat([]byte{1}, 32)})
	enc, _ := crypto.NewCodec(acemq.JSON(), ring)
	store := claimcheck.NewMemoryStore() // or NewFileStore(dir), NewSQLStore(db, dialect)
	codec, _ := claimcheck.New(enc, store)

	c, _ := acemq.Connect(ctx, "memory://example-claimcheck", acemq.Config{Logger: slog.New(slog.DiscardHandler), Codec: codec})
	defer c.Close(ctx)
	_ = c.Apply(ctx, acemq.NewTopology().Queue("reports", acemq.QueueOptions{Type: acemq.Classic}))

	type report struct{ Text string }
	got := make(chan string, 1)
	k, _ := acemq.Consume(ctx, c, "reports", func(_ context.Context, m *acemq.Message[report]) acemq.Decision {
		key, _ := claimcheck.KeyOf(m.Body)
		stored, _, _ := store.Get(ctx, key)
		id, _ := crypto.KeyIDOf(stored)
		got <- fmt.Sprintf("read %d bytes from a %d-byte message; stored encrypted under key id %s", len(m.Payload.Text), len(m.Body), id)
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	defer k.Close(ctx)
	_, _ = acemq.NewPublisher[report](c, "", "reports", acemq.PublisherConfig{}).Send(ctx, report{Text: strings.Repeat("x", 1<<20)})
	fmt.Println(<-got)
	// Output: read 1048576 bytes from a 35-byte message; stored encrypted under key id 2026-01
}
