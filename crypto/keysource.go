package crypto

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Encoding says how a key is written as text.
type Encoding int

const (
	// Hex is a key written as hexadecimal digits (64 for a 32-byte key).
	Hex Encoding = iota + 1
	// Base64 is a key in standard or URL-safe base64, padded or not.
	Base64
)

// String returns "hex" or "base64".
func (e Encoding) String() string {
	switch e {
	case Hex:
		return "hex"
	case Base64:
		return "base64"
	}
	return "Encoding(" + strconv.Itoa(int(e)) + ")"
}

// decode reads text in e. Its errors never quote the text: it is a secret.
func (e Encoding) decode(text string) ([]byte, error) {
	text = strings.TrimSpace(text)
	switch e {
	case Hex:
		b, err := hex.DecodeString(text)
		if err != nil {
			return nil, errors.New("it is not valid hex")
		}
		return b, nil
	case Base64:
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(text); err == nil {
				return b, nil
			}
		}
		return nil, errors.New("it is not valid base64")
	}
	return nil, fmt.Errorf("%s is not an encoding; use crypto.Hex or crypto.Base64", e)
}

// KeyFromBytes returns a Key holding a copy of secret. It fails when the
// id is not 1 to 255 bytes of UTF-8 or secret is not 16, 24 or 32 bytes.
func KeyFromBytes(id string, secret []byte) (Key, error) {
	k := Key{ID: id, Secret: bytes.Clone(secret)}
	if err := k.check(); err != nil {
		return Key{}, err
	}
	return k, nil
}

// KeyFromEnv returns the key with id whose secret is the environment
// variable named variable, written in enc. It fails when the variable is
// unset or empty, is not valid enc, or does not hold a 16, 24 or 32-byte
// key. Errors name the variable, never its value.
func KeyFromEnv(id, variable string, enc Encoding) (Key, error) {
	text, ok := os.LookupEnv(variable)
	if !ok || strings.TrimSpace(text) == "" {
		return Key{}, fmt.Errorf("acemq: the environment variable %s that should hold key %s is not set; set it to the key in %s", variable, strconv.Quote(id), enc)
	}
	secret, err := enc.decode(text)
	if err != nil {
		return Key{}, fmt.Errorf("acemq: the environment variable %s cannot be read as key %s: %v", variable, strconv.Quote(id), err)
	}
	return KeyFromBytes(id, secret)
}

// KeyFromFile returns the key with id whose secret is the content of the
// file at path (surrounding white space ignored), written in enc. It fails
// as KeyFromEnv does; errors name the file, never its content.
func KeyFromFile(id, path string, enc Encoding) (Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("acemq: cannot read key %s from %s: %w", strconv.Quote(id), path, err)
	}
	secret, err := enc.decode(string(b))
	if err != nil {
		return Key{}, fmt.Errorf("acemq: the file %s cannot be read as key %s: %v", path, strconv.Quote(id), err)
	}
	return KeyFromBytes(id, secret)
}

// LoadKeyring reads a keyring file (see ParseKeyring).
func LoadKeyring(path string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot read the keyring file: %w", err)
	}
	defer f.Close()
	r, err := ParseKeyring(f)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return r, nil
}

// ParseKeyring reads a keyring in the text form the acemq command and
// LoadKeyring use: one key per line, the first current,
//
//	# comment
//	2026-02 hex:000102…1f
//	2026-01 base64:AAECAwQF…= retired
//
// that is, the key id (no white space), the secret prefixed by its
// encoding, and optionally the word "retired". Blank lines and lines
// starting with # are skipped. Errors name the line, never a secret.
func ParseKeyring(in io.Reader) (*Keyring, error) {
	ring, err := NewKeyring()
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(in)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) < 2 || len(fields) > 3 || (len(fields) == 3 && fields[2] != "retired") {
			return nil, fmt.Errorf("acemq: keyring line %d is not \"ID hex:KEY\" or \"ID base64:KEY\", optionally followed by \"retired\"", line)
		}
		id := fields[0]
		encName, value, ok := strings.Cut(fields[1], ":")
		var enc Encoding
		switch {
		case ok && encName == "hex":
			enc = Hex
		case ok && encName == "base64":
			enc = Base64
		default:
			return nil, fmt.Errorf("acemq: keyring line %d (key %s): the key must start with \"hex:\" or \"base64:\"", line, strconv.Quote(id))
		}
		secret, err := enc.decode(value)
		if err != nil {
			return nil, fmt.Errorf("acemq: keyring line %d (key %s): %v", line, strconv.Quote(id), err)
		}
		if err := ring.Add(Key{ID: id, Secret: secret}); err != nil {
			return nil, fmt.Errorf("acemq: keyring line %d: %w", line, err)
		}
		if len(fields) == 3 {
			if err := ring.Retire(id); err != nil {
				return nil, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("acemq: cannot read the keyring: %w", err)
	}
	return ring, nil
}
