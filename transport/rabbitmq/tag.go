package rabbitmq

import (
	"crypto/rand"
	"encoding/hex"
)

// uniqueTag returns a consumer tag for a subscription that named none.
func uniqueTag() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "acemq-" + hex.EncodeToString(b[:])
}
