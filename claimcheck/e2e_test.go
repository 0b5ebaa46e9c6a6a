package claimcheck_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/claimcheck"
	"github.com/acemq-go/acemq/claimcheck/internal/brokertest"
	"github.com/acemq-go/acemq/claimcheck/internal/testenv"
	"github.com/acemq-go/acemq/codec/avro"
	"github.com/acemq-go/acemq/codec/schemas"
	"github.com/acemq-go/acemq/crypto"
)

type document struct {
	ID   string `json:"id" avro:"id"`
	Text string `json:"text" avro:"text"`
}

// documentSchema is document as Avro.
const documentSchema = `{"type":"record","name":"Document","namespace":"org.acemq.test","fields":[{"name":"id","type":"string"},{"name":"text","type":"string"}]}`

// settlements records every settlement of a Conn.
type settlements chan acemq.Settlement

func (s settlements) next(t *testing.T) acemq.Settlement {
	t.Helper()
	select {
	case x := <-s:
		return x
	case <-time.After(20 * time.Second):
		t.Fatal("no settlement arrived")
	}
	return acemq.Settlement{}
}

func connect(t *testing.T, url string, s settlements) *acemq.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler), OnSettlement: func(x acemq.Settlement) { s <- x }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func queue(t *testing.T, c *acemq.Conn, prefix string) string {
	t.Helper()
	q := testenv.Unique(prefix)
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
			_, _ = c.DeleteQueue(context.Background(), name)
		}
	})
	return q
}

// encryptedClaimCheck is the documented order: the claim check wraps the
// encryption, which wraps JSON.
func encryptedClaimCheck(t *testing.T, store claimcheck.Store) (acemq.Codec, *crypto.Keyring) {
	t.Helper()
	return encryptedClaimCheckOf(t, store, acemq.JSON())
}

// encryptedClaimCheckOf is claimcheck(crypto(inner)).
func encryptedClaimCheckOf(t *testing.T, store claimcheck.Store, inner acemq.Codec) (acemq.Codec, *crypto.Keyring) {
	t.Helper()
	ring, err := crypto.NewKeyring(crypto.Key{ID: "2026-01", Secret: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := crypto.NewCodec(inner, ring)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := claimcheck.New(enc, store)
	if err != nil {
		t.Fatal(err)
	}
	return cc, ring
}

// TestEncryptedClaimCheckedMiBBodyCrossesBothBrokers publishes a 1 MiB
// document through claimcheck(crypto(json)) and reads it back: the body on
// the wire is a framed key under 100 bytes with the encrypted content
// type, the store holds only ciphertext under key id 2026-01, and the
// consumer decodes the document whole.
func TestEncryptedClaimCheckedMiBBodyCrossesBothBrokers(t *testing.T) {
	crossBothBrokers(t, func(t *testing.T) acemq.Codec { return acemq.JSON() })
}

// TestEncryptedClaimCheckedAvroBody is the full chain: a 1 MiB
// document encoded as registry-framed Avro, encrypted, claim-checked,
// published on both brokers, consumed and decoded.
func TestEncryptedClaimCheckedAvroBody(t *testing.T) {
	crossBothBrokers(t, func(t *testing.T) acemq.Codec {
		codec, err := avro.Registered(context.Background(), schemas.NewMemory(), "document", documentSchema)
		if err != nil {
			t.Fatal(err)
		}
		return codec
	})
}

func crossBothBrokers(t *testing.T, inner func(t *testing.T) acemq.Codec) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		ctx := context.Background()
		store := claimcheck.NewMemoryStore()
		codec, _ := encryptedClaimCheckOf(t, store, inner(t))
		s := make(settlements, 16)
		c := connect(t, url, s)
		q := queue(t, c, "claimcheck.e2e")
		doc := document{ID: "doc-1", Text: strings.Repeat("confidential ", (1<<20)/13+1)}

		type seen struct {
			body        []byte
			contentType string
			doc         document
		}
		got := make(chan seen, 1)
		k, err := acemq.Consume(ctx, c, q, func(_ context.Context, m *acemq.Message[document]) acemq.Decision {
			got <- seen{m.Body, m.ContentType, m.Payload}
			return acemq.Accept()
		}, acemq.ConsumerConfig{Codec: codec})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close(ctx)
		if _, err := acemq.NewPublisher[document](c, "", q, acemq.PublisherConfig{Codec: codec}).Send(ctx, doc); err != nil {
			t.Fatal(err)
		}
		var g seen
		select {
		case g = <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("the message never arrived")
		}
		if g.doc != doc {
			t.Fatalf("decoded a %d-byte text, want the %d-byte document", len(g.doc.Text), len(doc.Text))
		}
		if len(g.body) >= 100 || g.contentType != crypto.ContentType {
			t.Fatalf("on the wire: %d bytes with content type %q; want under 100 bytes, %s", len(g.body), g.contentType, crypto.ContentType)
		}
		key, ok := claimcheck.KeyOf(g.body)
		if !ok {
			t.Fatalf("the wire body %q is not an offloaded claim check", g.body)
		}
		stored, found, err := store.Get(ctx, key)
		if err != nil || !found {
			t.Fatalf("store: %v %v", found, err)
		}
		if id, err := crypto.KeyIDOf(stored); err != nil || id != "2026-01" {
			t.Fatalf("the store does not hold an encrypted frame: %v", err)
		}
		if bytes.Contains(stored, []byte("confidential")) {
			t.Fatal("the store holds plaintext")
		}
		if x := s.next(t); x.Outcome != acemq.ConsumeAcked {
			t.Fatalf("settlement %+v", x)
		}
	})
}

// TestMissingPayloadIsParkedAndStoreOutageIsRetriedOnBothBrokers: a body
// whose payload was deleted is parked with the key in the reason, byte
// for byte; a store that cannot be read, or does not answer within the
// decode deadline, sends the message down the retry path instead, and the
// message is read once the store answers. Nothing is lost.
func TestMissingPayloadIsParkedAndStoreOutageIsRetriedOnBothBrokers(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		ctx := context.Background()
		mem := claimcheck.NewMemoryStore()
		store := &switchable{Store: mem, mode: make(chan string, 4)}
		codec, _ := encryptedClaimCheck(t, store)
		s := make(settlements, 16)
		c := connect(t, url, s)
		q := queue(t, c, "claimcheck.faults")
		got := make(chan document, 2)
		k, err := acemq.Consume(ctx, c, q, func(_ context.Context, m *acemq.Message[document]) acemq.Decision {
			got <- m.Payload
			return acemq.Accept()
		}, acemq.ConsumerConfig{Codec: codec, DecodeTimeout: 50 * time.Millisecond, Retry: acemq.Fixed(3, 10*time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close(ctx)
		pub := acemq.NewPublisher[document](c, "", q, acemq.PublisherConfig{Codec: codec})
		big := strings.Repeat("b", claimcheck.DefaultThreshold)

		// A deleted payload: parked, reason naming the key.
		store.mode <- "ok"
		body, err := codec.Encode(document{ID: "gone", Text: big})
		if err != nil {
			t.Fatal(err)
		}
		key, _ := claimcheck.KeyOf(body)
		if err := mem.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		env := acemq.NewEnvelope()
		if err := c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: q, ContentType: codec.ContentType(), MessageID: env.ID, Headers: env.WireHeaders(), Body: body}); err != nil {
			t.Fatal(err)
		}
		x := s.next(t)
		if x.Outcome != acemq.ConsumeParked || !strings.Contains(x.Reason, `no payload under key "`+key+`"`) ||
			!strings.HasPrefix(x.Reason, `could not be decoded: acemq: the claimcheck(encrypted(json)) codec cannot read a body with content type "application/vnd.acemq.encrypted": `) {
			t.Fatalf("settlement %+v", x)
		}
		parked := brokertest.Pull(t, c, acemq.ParkedQueue(q))
		if !bytes.Equal(parked.Body, body) || parked.Envelope.Error != x.Reason {
			t.Fatal("the parked copy is not the original body with the reason")
		}

		// A store that errors, then hangs past the decode deadline, then
		// answers: retried twice, then read.
		store.mode <- "fail"
		store.mode <- "hang"
		if _, err := pub.Send(ctx, document{ID: "later", Text: big}); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if x := s.next(t); x.Outcome != acemq.ConsumeRetried {
				t.Fatalf("attempt %d: settlement %+v, want retried", i+1, x)
			}
		}
		if x := s.next(t); x.Outcome != acemq.ConsumeAcked {
			t.Fatalf("third attempt: settlement %+v, want acked", x)
		}
		if d := <-got; d.ID != "later" || len(d.Text) != len(big) {
			t.Fatalf("got %q with %d bytes", d.ID, len(d.Text))
		}
	})
}

// switchable is a store whose Gets follow a script: "ok" reads, "fail"
// returns an error, "hang" waits for the caller's deadline. With the
// script empty it reads. Puts always work.
type switchable struct {
	claimcheck.Store
	mode chan string
}

func (s *switchable) Get(ctx context.Context, key string) ([]byte, bool, error) {
	mode := "ok"
	select {
	case mode = <-s.mode:
	default:
	}
	switch mode {
	case "fail":
		return nil, false, errTransient
	case "hang":
		<-ctx.Done()
		return nil, false, ctx.Err()
	}
	return s.Store.Get(ctx, key)
}

var errTransient = errorString("the store's server is restarting")

type errorString string

func (e errorString) Error() string { return string(e) }
