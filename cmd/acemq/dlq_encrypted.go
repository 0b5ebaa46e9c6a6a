package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/claimcheck"
	"github.com/acemq-go/acemq/crypto"
)

// keyringFlag registers --keyring with $ACEMQ_KEYRING as its default: a
// keyring file (crypto.ParseKeyring's format) to show encrypted bodies
// decrypted.
func keyringFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVar(path, "keyring", os.Getenv("ACEMQ_KEYRING"),
		"keyring file (lines \"KEY-ID hex:KEY\" or \"KEY-ID base64:KEY\") to show encrypted bodies decrypted (default $ACEMQ_KEYRING); without one they are shown as \"encrypted with key id …\"")
}

// loadShowKeyring reads the keyring file at path; "" means none.
func loadShowKeyring(path string) (*crypto.Keyring, error) {
	if path == "" {
		return nil, nil
	}
	ring, err := crypto.LoadKeyring(path)
	if err != nil {
		return nil, fmt.Errorf("cannot use --keyring (%s); fix the file or leave --keyring out to show encrypted bodies by key id", sentence(err))
	}
	return ring, nil
}

// bodyText renders a dead-lettered body for people, seeing through the
// claim-check frame and the encryption frame before decodeBody renders
// what is left. An offloaded claim check shows its store key (the command
// has no store); an encrypted body shows its key id unless ring holds its
// key, in which case the plaintext is rendered.
func bodyText(contentType string, body []byte, ring *crypto.Keyring) string {
	if key, ok := claimcheck.KeyOf(body); ok {
		return fmt.Sprintf("(claim check: the payload is in the claim-check store under key %s; %d bytes on the wire)", strconv.Quote(key), len(body))
	}
	if len(body) >= 3 && body[0] == 0xac && body[1] == 0x01 && body[2] == 0x00 {
		body = body[3:] // an inline claim-check frame: the payload follows
	}
	if acemq.MediaType(contentType) != crypto.ContentType {
		return decodeBody(contentType, body)
	}
	id, err := crypto.KeyIDOf(body)
	if err != nil {
		return fmt.Sprintf("(%d bytes with content type %s that cannot be read: %s)", len(body), contentType, sentence(err))
	}
	if ring == nil {
		return fmt.Sprintf("(encrypted with key id %s, %d bytes; pass --keyring FILE or set ACEMQ_KEYRING to show it decrypted)", strconv.Quote(id), len(body))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	plain, err := ring.Decrypt(ctx, body)
	if err != nil {
		return fmt.Sprintf("(encrypted with key id %s, %d bytes; cannot decrypt it: %s)", strconv.Quote(id), len(body), sentence(err))
	}
	return decodeBody("", plain)
}
