package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/claimcheck"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
	"github.com/acemq-go/acemq/crypto"
)

func showRing(t *testing.T) (*crypto.Keyring, string) {
	t.Helper()
	secret := bytes.Repeat([]byte{3}, 32)
	ring, err := crypto.NewKeyring(crypto.Key{ID: "2026-01", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return ring, "# test keyring\n2026-01 hex:" + hex.EncodeToString(secret) + "\n"
}

func TestBodyTextSeesThroughEncryptionAndClaimChecks(t *testing.T) {
	ring, _ := showRing(t)
	plain := []byte(`{"card":"4111"}`)
	sealed, err := ring.Encrypt(plain)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := crypto.NewKeyring(crypto.Key{ID: "2026-01", Secret: bytes.Repeat([]byte{4}, 32)})
	cases := []struct {
		name, contentType string
		body              []byte
		ring              *crypto.Keyring
		want, never       string
	}{
		{"encrypted, no keyring", crypto.ContentType, sealed, nil, `(encrypted with key id "2026-01", ` + "", "4111"},
		{"encrypted, keyring", crypto.ContentType, sealed, ring, `"card": "4111"`, ""},
		{"encrypted, wrong key", crypto.ContentType, sealed, other, "cannot decrypt it: cannot decrypt a body under key id", "4111"},
		{"inline claim check around encryption", crypto.ContentType, append([]byte{0xac, 1, 0}, sealed...), nil, `encrypted with key id "2026-01"`, "4111"},
		{"offloaded claim check", crypto.ContentType, append([]byte{0xac, 1, 1}, "0a1b"...), ring, `the claim-check store under key "0a1b"`, ""},
		{"not a frame", crypto.ContentType, []byte("{}"), nil, "cannot be read: the body is not a readable AceMQ encrypted frame", ""},
		{"plain json", "application/json", []byte(`{"a":1}`), nil, `"a": 1`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := bodyText(c.contentType, c.body, c.ring)
			if !strings.Contains(got, c.want) || (c.never != "" && strings.Contains(got, c.never)) {
				t.Fatalf("bodyText = %q, want it to contain %q and not %q", got, c.want, c.never)
			}
		})
	}
}

func TestDLQShowNamesTheKeyIDUnlessGivenAKeyringOnRabbitMQ(t *testing.T) {
	url := testenv.AMQPURL(t)
	c := libConn(t, url)
	ctx := context.Background()
	q := testenv.Unique("cli.encrypted")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{}).DeadLetters(q)); err != nil {
		t.Fatal(err)
	}
	deleteQueues(t, c, q, q+".dlq", q+".parked")
	ring, file := showRing(t)
	enc, err := crypto.NewCodec(acemq.JSON(), ring)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := claimcheck.New(enc, claimcheck.NewMemoryStore(), claimcheck.WithThreshold(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	body, err := cc.Encode(map[string]string{"card": "4111-1111"})
	if err != nil {
		t.Fatal(err)
	}
	env := acemq.NewEnvelope()
	env.Error = "could not be decoded: no key"
	if err := c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: q + ".parked", ContentType: crypto.ContentType, MessageID: env.ID, Headers: env.WireHeaders(), Body: body}); err != nil {
		t.Fatal(err)
	}

	r := run0(t, "", "dlq", "show", q+".parked", "--url", url)
	if !strings.Contains(r.stdout, `(encrypted with key id "2026-01"`) || strings.Contains(r.stdout, "4111") {
		t.Fatalf("without a keyring:\n%s", r.stdout)
	}
	path := writeFile(t, file)
	r = run0(t, "", "dlq", "show", q+".parked", "--url", url, "--keyring", path)
	if !strings.Contains(r.stdout, `"card": "4111-1111"`) {
		t.Fatalf("with --keyring:\n%s", r.stdout)
	}
	t.Setenv("ACEMQ_KEYRING", path)
	r = run0(t, "", "dlq", "show", q+".parked", "--url", url)
	if !strings.Contains(r.stdout, `"card": "4111-1111"`) {
		t.Fatalf("with ACEMQ_KEYRING:\n%s", r.stdout)
	}
	mustFailWithSentence(t, acemqCmd(t, "", "dlq", "show", q+".parked", "--url", url, "--keyring", writeFile(t, "2026-01 hex:zz\n")), "cannot use --keyring")
	if d := depth(t, c, q+".parked"); d != 1 {
		t.Fatalf("dlq show removed the message: depth %d", d)
	}
}
