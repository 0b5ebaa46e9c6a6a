package crypto_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/crypto"
	"github.com/acemq-go/acemq/internal/testenv"
)

type order struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
}

func jsonCodec(t *testing.T, r *crypto.Keyring) acemq.Codec {
	t.Helper()
	c, err := crypto.NewCodec(acemq.JSON(), r)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCodecRoundTripsAndClaimsOnlyItsOwnContentType(t *testing.T) {
	c := jsonCodec(t, ring(t, key(t, "k", 1)))
	body, err := c.Encode(order{ID: "o-1", Total: 42})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(body, []byte("o-1")) {
		t.Fatal("the plaintext is visible in the body")
	}
	var got order
	if err := c.Decode(c.ContentType(), body, &got); err != nil || got != (order{"o-1", 42}) {
		t.Fatalf("Decode = %+v, %v", got, err)
	}
	if c.ContentType() != "application/vnd.acemq.encrypted" || c.Name() != "encrypted(json)" {
		t.Fatalf("content type %q name %q", c.ContentType(), c.Name())
	}
	for ct, want := range map[string]bool{
		"application/vnd.acemq.encrypted":                true,
		" Application/VND.acemq.encrypted; inner=json ":  true,
		"application/json":                               false,
		"application/vnd.acemq.encrypted+json":           false,
		"":                                               false,
		"application/octet-stream":                       false,
		"application/vnd.acemq.encrypted.something-else": false,
	} {
		if got := c.Claims(ct); got != want {
			t.Errorf("Claims(%q) = %v, want %v", ct, got, want)
		}
	}
	if err := c.Decode("application/json", body, &got); err == nil || !acemq.IsFatal(err) {
		t.Fatalf("decoding under another content type: %v, want a fatal refusal", err)
	}
}

// claimCheckLike answers to what a claim-check codec answers to.
type claimCheckLike struct{ acemq.Codec }

func (claimCheckLike) ClaimCheckThreshold() int { return 65536 }

func TestEncryptingAClaimCheckIsRefusedInFavourOfTheOtherOrder(t *testing.T) {
	_, err := crypto.NewCodec(claimCheckLike{acemq.JSON()}, ring(t, key(t, "k", 1)))
	if err == nil || !strings.Contains(err.Error(), "claimcheck.New(crypto.NewCodec(inner, ring), store)") {
		t.Fatalf("err = %v, want the order rule", err)
	}
	if _, err := crypto.NewCodec(nil, ring(t)); err == nil {
		t.Fatal("a nil inner codec was accepted")
	}
	if _, err := crypto.NewCodec(acemq.JSON(), nil); err == nil {
		t.Fatal("a nil keyring was accepted")
	}
}

// TestBadBodiesAreParkedWithTheirReason runs every bad input through a
// real consumer: each is parked in {q}.parked, byte for byte, with a
// reason naming the codec, the content type and (where the frame has one)
// the key id, and never the key or the plaintext. Nothing is lost: every
// message sent is either handled or parked.
func TestBadBodiesAreParkedWithTheirReason(t *testing.T) {
	ctx := context.Background()
	publisherKey := key(t, "2026-01", 1)
	pub := ring(t, publisherKey)
	good := encrypt(t, pub, `{"id":"o-1","total":1}`)
	tampered := bytes.Clone(good)
	tampered[len(tampered)-3] ^= 0x80
	version9 := bytes.Clone(good)
	version9[1] = 9
	wrongKey := key(t, "2026-01", 2)

	cases := []struct {
		name string
		body []byte
		want string
	}{
		{"wrong key", good, `cannot decrypt a body under key id "2026-01": the key held under that id is not the one it was encrypted with, or the body was altered`},
		{"tampered byte", tampered, `cannot decrypt a body under key id "2026-01"`},
		{"truncated frame", good[:20], "it was cut short"},
		{"unknown framing version", version9, "framing version 9"},
		{"oversize key id", append([]byte{0xae, 1, 255}, make([]byte, 40)...), "announces a 255-byte key id"},
		{"missing key", encrypt(t, ring(t, key(t, "2025-12", 3)), `{"id":"o-2"}`), `key id "2025-12", which is not in the keyring`},
	}
	c, err := acemq.Connect(ctx, "memory://"+strings.ReplaceAll(t.Name(), "/", "-"), acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	q := testenv.Unique("crypto.bad")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	handled := make(chan order, len(cases))
	k, err := acemq.Consume(ctx, c, q, func(_ context.Context, m *acemq.Message[order]) acemq.Decision {
		handled <- m.Payload
		return acemq.Accept()
	}, acemq.ConsumerConfig{Codec: jsonCodec(t, ring(t, wrongKey))})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(ctx)
	ids := map[string]string{}
	for _, tc := range cases {
		env := acemq.NewEnvelope()
		ids[env.ID] = tc.name
		if err := c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: q, ContentType: crypto.ContentType, MessageID: env.ID, Headers: env.WireHeaders(), Body: tc.body}); err != nil {
			t.Fatal(err)
		}
	}
	parked := pullN(t, c, acemq.ParkedQueue(q), len(cases))
	byName := map[string]*acemq.Pulled{}
	for _, m := range parked {
		byName[ids[m.Envelope.ID]] = m
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := byName[tc.name]
			if m == nil {
				t.Fatal("not parked")
			}
			const prefix = `could not be decoded: acemq: the encrypted(json) codec cannot read a body with content type "application/vnd.acemq.encrypted": `
			if !strings.HasPrefix(m.Envelope.Error, prefix) || !strings.Contains(m.Envelope.Error, tc.want) {
				t.Fatalf("reason %q\nwant prefix %q and %q", m.Envelope.Error, prefix, tc.want)
			}
			if !bytes.Equal(m.Body, tc.body) || m.ContentType != crypto.ContentType {
				t.Fatal("the parked copy is not the original body and content type")
			}
			assertNoSecrets(t, m.Envelope.Error, [][]byte{publisherKey.Secret, wrongKey.Secret}, `"o-1"`, `"o-2"`)
		})
	}
	select {
	case p := <-handled:
		t.Fatalf("the handler ran on %+v", p)
	default:
	}
}

func TestRetiredButKeptKeyStillDecryptsThroughAConsumer(t *testing.T) {
	ctx := context.Background()
	r := ring(t, key(t, "2026-01", 1))
	codec := jsonCodec(t, r)
	c, err := acemq.Connect(ctx, "memory://"+t.Name(), acemq.Config{Logger: slog.New(slog.DiscardHandler), Codec: codec})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	q := testenv.Unique("crypto.rotate")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	pub := acemq.NewPublisher[order](c, "", q, acemq.PublisherConfig{})
	if _, err := pub.Send(ctx, order{ID: "before"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Rotate(key(t, "2026-02", 2)); err != nil {
		t.Fatal(err)
	}
	if err := r.Retire("2026-01"); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Send(ctx, order{ID: "after"}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	k, err := acemq.Consume(ctx, c, q, func(_ context.Context, m *acemq.Message[order]) acemq.Decision {
		id, _ := crypto.KeyIDOf(m.Body)
		got <- m.Payload.ID + "@" + id
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(ctx)
	for _, want := range []string{"before@2026-01", "after@2026-02"} {
		select {
		case g := <-got:
			if g != want {
				t.Fatalf("got %s, want %s", g, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never arrived", want)
		}
	}
}

// pullN takes n messages from queue, waiting for them, and acks them.
func pullN(t *testing.T, c *acemq.Conn, queue string, n int) []*acemq.Pulled {
	t.Helper()
	p, err := c.NewPuller(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var out []*acemq.Pulled
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		m, ok, err := p.Pull(context.Background(), queue)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if time.Now().After(deadline) {
				t.Fatalf("%s holds %d messages after 10s, want %d", queue, len(out), n)
			}
			time.Sleep(2 * time.Millisecond) // polling an empty queue: no event exists
			continue
		}
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}
