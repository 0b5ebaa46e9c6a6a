package console

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/header"
)

// contentIDPrefix starts the id the console gives a message that carries
// none of its own.
const contentIDPrefix = "content-"

// A message without an x-acemq-id header or an AMQP message-id gets a new
// random id each time it is read, so a link to it or an action on it by
// that id would find nothing. The console names such a message by what it
// holds instead: a hash of its envelope fields (less the random id),
// application headers (less x-delivery-count and x-acquired-count, which
// a read of a quorum queue raises) and body, none of which a read changes. Identical messages
// share the hash; the n-th of them in queue order gets "-n" appended. A
// read keeps the queue's order, so the numbering is the same on every
// read; when an earlier identical copy leaves the queue the later ones
// move up a number, which is harmless, since they are identical.

// contentHash is the hash part of a message's content id.
func contentHash(env acemq.Envelope, body []byte) string {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	corr := env.CorrelationID
	if corr == env.ID {
		corr = "" // defaulted to the (random) id
	}
	first := ""
	if !env.FirstSeen.IsZero() {
		first = fmt.Sprint(env.FirstSeen.UnixMilli())
	}
	for _, s := range []string{env.Type, fmt.Sprint(env.Version), corr, env.CausationID, fmt.Sprint(env.Attempt), first,
		env.Origin, env.Error, env.Claim, strings.Join(env.Route, ","), fmt.Sprint(env.RoutePosition), env.RouteID, env.ReplyTo} {
		field(s)
	}
	hs := env.Headers()
	names := make([]string, 0, len(hs))
	for k := range hs {
		if k != "x-delivery-count" && k != "x-acquired-count" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	field(fmt.Sprint(len(names)))
	for _, k := range names {
		field(k)
		field(formatValue(hs[k], ""))
	}
	field(string(body))
	return hex.EncodeToString(h.Sum(nil)[:10])
}

// keyer numbers identical messages in the order one pass over a queue
// meets them. One keyer serves one pass.
type keyer struct{ seen map[string]int }

func newKeyer() *keyer { return &keyer{seen: map[string]int{}} }

// next returns the content id of the next message of the pass, and its
// hash.
func (k *keyer) next(env acemq.Envelope, body []byte) (id, hash string) {
	h := contentHash(env, body)
	k.seen[h]++
	if n := k.seen[h]; n > 1 {
		return fmt.Sprintf("%s%s-%d", contentIDPrefix, h, n), h
	}
	return contentIDPrefix + h, h
}

// ownID reports whether m's envelope id is the message's own (from the
// x-acemq-id header or the message-id property) rather than made up by
// this read.
func ownID(m *acemq.Pulled) bool {
	id := m.Envelope.ID
	if id == "" {
		return false
	}
	if m.MessageID == id {
		return true
	}
	switch v := m.Headers[header.ID].(type) {
	case string:
		return v == id
	case []byte:
		return string(v) == id
	}
	return false
}

// shownID is the id the console shows and links for m: its own id when it
// has one (shown escaped and marked, linked percent-encoded: an id with a
// zero-width or bidi character is still its own), else its content id.
func shownID(m *acemq.Pulled, contentID string) string {
	if ownID(m) {
		return m.Envelope.ID
	}
	return contentID
}
