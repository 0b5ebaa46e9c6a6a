package acemq

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/internal/wire"
	"github.com/acemq-go/acemq/transport"
)

// readEnvelope applies the contract's tolerant read rules to a delivery's
// headers and properties. It never fails.
//
// Every x-acemq-* header leaves the application headers (known ones become
// fields, unknown ones are dropped); every other header, broker-owned ones
// such as x-death included, stays visible as an application header. The
// application-header map is allocated only when there is one to keep.
func readEnvelope(headers transport.Table, routingKey, messageID, replyTo string) Envelope {
	var e Envelope
	var version, attempt, position int64
	var firstSeen int64
	var route string
	apps := 0
	for k, v := range headers {
		if !strings.HasPrefix(k, header.ReservedPrefix) {
			apps++ // a null ('V') is kept too: application headers are as given
			continue
		}
		switch k {
		case header.ID:
			e.ID, _ = readString(v)
		case header.Type:
			e.Type, _ = readString(v)
		case header.Version:
			version, _ = readInt(v)
		case header.Correlation:
			e.CorrelationID, _ = readString(v)
		case header.Causation:
			e.CausationID, _ = readString(v)
		case header.Attempt:
			attempt, _ = readInt(v)
		case header.FirstSeen:
			firstSeen, _ = readInt(v)
		case header.Origin:
			e.Origin, _ = readString(v)
		case header.Error:
			e.Error, _ = readString(v)
		case header.Claim:
			e.Claim, _ = readString(v)
		case header.Route:
			route, _ = readString(v)
		case header.RoutePosition:
			position, _ = readInt(v)
		case header.RouteID:
			e.RouteID, _ = readString(v)
		}
	}

	if e.ID == "" && utf8.ValidString(messageID) {
		e.ID = messageID
	}
	if e.ID == "" {
		e.ID = newUUID()
	}
	if e.Type == "" {
		e.Type = routingKey
	}
	if e.Type == "" {
		e.Type = "message"
	}
	if e.CorrelationID == "" {
		e.CorrelationID = e.ID
	}
	e.Version = atLeastOne(version)
	e.Attempt = atLeastOne(attempt)
	if firstSeen > 0 {
		e.FirstSeen = time.UnixMilli(firstSeen).UTC()
	}
	if route != "" {
		e.Route = strings.Split(route, ",")
		if position > 0 && position <= math.MaxInt32 {
			e.RoutePosition = int(position)
		}
	}
	if s, ok := readString(headers[header.ReplyTo]); ok {
		e.ReplyTo = s
	} else if utf8.ValidString(replyTo) {
		e.ReplyTo = replyTo
	}

	if apps > 0 {
		e.headers = make(map[string]any, apps)
		for k, v := range headers {
			if !strings.HasPrefix(k, header.ReservedPrefix) {
				e.headers[k] = v
			}
		}
	}
	return e
}

// atLeastOne is the version and attempt read rule: below 1 (including
// absent and unreadable, read as 0) becomes 1. Any value an int holds is
// kept (other clients write 2^31 and above as a 64-bit 'l'); one beyond
// it (only where int is 32 bits) is unreadable, so 1.
func atLeastOne(v int64) int {
	if v < 1 || v > math.MaxInt {
		return 1
	}
	return int(v)
}

// readString reads a string field tolerantly (contract §1.4): a string or
// []byte as UTF-8 text, an integer or float as decimal text. It reports
// false for an empty result and for anything unreadable. One rule for
// both text forms: bytes that are not UTF-8 are unreadable whether they
// arrive as a string or as []byte, so a field read here can always be
// written back (only UTF-8 strings are written).
func readString(v any) (string, bool) {
	var s string
	switch x := v.(type) {
	case string:
		if !utf8.ValidString(x) {
			return "", false
		}
		s = x
	case []byte:
		if !utf8.Valid(x) {
			return "", false
		}
		s = string(x)
	case int:
		s = strconv.FormatInt(int64(x), 10)
	case int8:
		s = strconv.FormatInt(int64(x), 10)
	case int16:
		s = strconv.FormatInt(int64(x), 10)
	case int32:
		s = strconv.FormatInt(int64(x), 10)
	case int64:
		s = strconv.FormatInt(x, 10)
	case uint:
		s = strconv.FormatUint(uint64(x), 10)
	case uint8:
		s = strconv.FormatUint(uint64(x), 10)
	case uint16:
		s = strconv.FormatUint(uint64(x), 10)
	case uint32:
		s = strconv.FormatUint(uint64(x), 10)
	case uint64:
		s = strconv.FormatUint(x, 10)
	case float32:
		return formatFloat(float64(x), 32)
	case float64:
		return formatFloat(x, 64)
	default:
		return "", false
	}
	return s, s != ""
}

func formatFloat(f float64, bits int) (string, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", false
	}
	return strconv.FormatFloat(f, 'f', -1, bits), true
}

// readInt reads an integer field tolerantly (contract §1.4): any integer
// width by value (an unsigned value beyond int64 is unreadable), base-10
// text with an optional sign from a string or []byte, a float truncated
// toward zero. It reports false for anything unreadable.
func readInt(v any) (int64, bool) {
	if n, ok := wire.Int(v); ok {
		return n, true
	}
	switch x := v.(type) {
	case uint, uint64:
		return 0, false // beyond int64: unreadable
	case float32:
		return floatToInt(float64(x))
	case float64:
		return floatToInt(x)
	case string:
		return parseInt(x)
	case []byte:
		return parseInt(string(x))
	}
	return 0, false
}

func floatToInt(f float64) (int64, bool) {
	f = math.Trunc(f)
	// -2^63 is representable exactly; 2^63 is not an int64.
	if math.IsNaN(f) || f < -(1<<63) || f >= 1<<63 {
		return 0, false
	}
	return int64(f), true
}

func parseInt(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// ReplayedAt reports when the message was last replayed, from its
// acemq-replayed-at header (contract §1.7). It accepts every form the
// family writes: epoch milliseconds as an integer of any width or as
// decimal text, RFC 3339 in UTC with "Z" and 0–9 fraction digits, and RFC
// 3339 with a numeric offset such as "+00:00". The time is returned in UTC.
// It reports false when the header is absent or in none of these forms.
func ReplayedAt(e Envelope) (time.Time, bool) {
	v, ok := e.headers[header.ReplayedAt]
	if !ok {
		return time.Time{}, false
	}
	if ms, ok := readInt(v); ok {
		return time.UnixMilli(ms).UTC(), true
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case []byte:
		s = string(x)
	default:
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// ReplayCount reports how many times the message has been replayed, from
// its acemq-replay-count header (read tolerantly, contract §1.4). It is 0
// when the header is absent, unreadable or negative.
func ReplayCount(e Envelope) int {
	n, ok := readInt(e.headers[header.ReplayCount])
	if !ok || n < 0 || n > math.MaxInt32 {
		return 0
	}
	return int(n)
}
