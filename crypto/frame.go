package crypto

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// The §2.3 framing.
const (
	frameMagic   = 0xAE
	frameVersion = 0x01
	nonceSize    = 12
	tagSize      = 16
	// MaxKeyIDLength is the longest key id the framing carries, in bytes.
	MaxKeyIDLength = 255
)

// ErrMalformed matches (errors.Is) every error saying a body is not a
// readable encrypted frame: not framed at all, an unknown framing
// version, a zero key-id length, a key id that is not UTF-8, or a body cut
// short.
var ErrMalformed = errors.New("acemq: the body is not a readable AceMQ encrypted frame")

// ErrDecrypt matches (errors.Is) a DecryptError.
var ErrDecrypt = errors.New("acemq: the body cannot be decrypted")

// ErrUnknownKey matches (errors.Is) a MissingKeyError.
var ErrUnknownKey = errors.New("acemq: no key with that id")

// MalformedError says what is wrong with an encrypted frame. It never
// holds the body.
type MalformedError struct {
	// Reason is the sentence after "acemq: the body is not a readable AceMQ
	// encrypted frame: ".
	Reason string
}

// Error renders the reason.
func (e *MalformedError) Error() string {
	return "acemq: the body is not a readable AceMQ encrypted frame: " + e.Reason
}

// Is makes errors.Is(err, ErrMalformed) true.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

// DecryptError is a frame whose ciphertext did not authenticate under the
// key named by its key id: the key is not the one the publisher used, or
// the body was altered on the way. The two cases are one error on purpose
// (telling them apart would help an attacker). It never holds the key or
// any plaintext.
type DecryptError struct {
	KeyID string
}

// Error names the key id and both possible causes.
func (e *DecryptError) Error() string {
	return fmt.Sprintf("acemq: cannot decrypt a body under key id %s: the key held under that id is not the one it was encrypted with, or the body was altered; check the keyring's key for this id", strconv.Quote(e.KeyID))
}

// Is makes errors.Is(err, ErrDecrypt) true.
func (e *DecryptError) Is(target error) bool { return target == ErrDecrypt }

// MissingKeyError is a frame naming a key id that neither the keyring nor
// its KeyProvider has. Retrying cannot help; the message is parked until
// the key is added back.
type MissingKeyError struct {
	KeyID string
}

// Error names the key id and what to do.
func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("acemq: the body is encrypted under key id %s, which is not in the keyring; add that key (a retired key must stay in the keyring while messages under it can still arrive) and replay the message", strconv.Quote(e.KeyID))
}

// Is makes errors.Is(err, ErrUnknownKey) true.
func (e *MissingKeyError) Is(target error) bool { return target == ErrUnknownKey }

func malformed(format string, args ...any) error {
	return &MalformedError{Reason: fmt.Sprintf(format, args...)}
}

// checkKeyID refuses a key id the framing cannot carry.
func checkKeyID(id string) error {
	switch {
	case id == "":
		return errors.New("acemq: a key id cannot be empty; key ids are 1 to 255 bytes of UTF-8, such as \"2026-01\"")
	case len(id) > MaxKeyIDLength:
		return fmt.Errorf("acemq: key id %.40q... is %d bytes; the encryption framing carries key ids of 1 to 255 bytes, so choose a shorter id", id, len(id))
	case !utf8.ValidString(id):
		return errors.New("acemq: a key id must be UTF-8; choose an id of 1 to 255 bytes of UTF-8 text")
	}
	return nil
}

// parseHeader reads the magic, the version and the key id, and returns
// the key id and the header's length.
func parseHeader(body []byte) (string, int, error) {
	switch {
	case len(body) == 0:
		return "", 0, malformed("the body is empty")
	case body[0] != frameMagic:
		return "", 0, malformed("it starts with 0x%02x, not the 0xae an encrypted body starts with", body[0])
	case len(body) < 3:
		return "", 0, malformed("it is %d bytes, too short to hold the header; it was cut short", len(body))
	case body[1] != frameVersion:
		return "", 0, malformed("it uses framing version %d, and this library reads version %d; upgrade the reader or publish with version %d", body[1], frameVersion, frameVersion)
	case body[2] == 0:
		return "", 0, malformed("its key id length is 0; key ids are 1 to 255 bytes")
	}
	n := int(body[2])
	if len(body) < 3+n {
		return "", 0, malformed("it is %d bytes, and its header announces a %d-byte key id; it was cut short", len(body), n)
	}
	id := body[3 : 3+n]
	if !utf8.Valid(id) {
		return "", 0, malformed("its key id is not UTF-8")
	}
	return string(id), 3 + n, nil
}

// KeyIDOf returns the id of the key a body was encrypted under, read from
// the frame without any key. It fails with an error matching ErrMalformed
// when the body is not an encrypted frame.
func KeyIDOf(body []byte) (string, error) {
	id, _, err := parseHeader(body)
	return id, err
}

// splitFrame returns the key id, the associated data, the nonce and the
// ciphertext with its tag.
func splitFrame(body []byte) (id string, ad, nonce, sealed []byte, err error) {
	id, h, err := parseHeader(body)
	if err != nil {
		return "", nil, nil, nil, err
	}
	if need := h + nonceSize + tagSize; len(body) < need {
		return "", nil, nil, nil, malformed("it is %d bytes, shorter than the %d its header, nonce and tag take; it was cut short", len(body), need)
	}
	return id, body[:h], body[h : h+nonceSize], body[h+nonceSize:], nil
}
