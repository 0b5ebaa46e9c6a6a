package main

import (
	"encoding/base64"
	"fmt"

	"github.com/acemq-go/acemq/cmd/acemq/internal/wire"
)

// showUnreadable decodes the headers of a message the Go AMQP client could
// not read. The rabbitmq transport keeps them as their AMQP bytes in one
// header (so the connection stays up and the message can be parked); here
// they are decoded, without the client's depth and size limits, into
// JSON-ready values, with a note saying why they are apart.
func showUnreadable(s *shownMessage, h map[string]any) {
	raw, ok := h[wire.KeptHeader].([]byte)
	if !ok {
		return
	}
	why, _ := h[wire.UnreadableHeader].(string) // on the source queue
	if why == "" {
		why = s.Error // on .parked, the reason is the error
	}
	s.Headers[wire.KeptHeader] = fmt.Sprintf("(%d bytes of AMQP field table, decoded under unreadableHeaders)", len(raw))
	decoded, err := wire.DecodeTable(raw)
	s.UnreadableHeaders = jsonReady(decoded).(map[string]any)
	s.Note = "these headers cannot be read by the Go AMQP client (amqp091-go), which closes its connection on them; AceMQ kept their original bytes in the " +
		wire.KeptHeader + " header and shows them decoded here. Reason: " + why
	if err != nil {
		s.Note += fmt.Sprintf(" (the kept bytes decode only in part: %v)", err)
	}
}

// jsonReady turns decoded field values into values encoding/json renders
// readably: byte arrays as base64 text, everything else as it is.
func jsonReady(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonReady(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonReady(e)
		}
		return out
	case []byte:
		return "base64:" + base64.StdEncoding.EncodeToString(x)
	}
	return v
}
