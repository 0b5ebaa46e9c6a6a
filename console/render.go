package console

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console/internal/safetext"
	"github.com/acemq-go/acemq/transport"
)

// encryptedType is the content type of an encrypted body (contract §2.3).
const encryptedType = "application/vnd.acemq.encrypted"

// body is a message body rendered for people.
type body struct {
	Kind string // "json", "text", "encrypted", "binary", "codec NAME", "empty"
	Text string
	Cut  bool // only the start is shown; the raw bytes link has it all
}

// maxShown bounds the text a message page shows inline.
const maxShown = 64 << 10

// decodeBody renders b by the codec its content type names: JSON
// indented, text as it is, another registered codec's value as JSON, an
// encrypted body by its key id (the console holds no key), anything else
// as a hex dump of its start.
func decodeBody(contentType string, b []byte) body {
	mt := acemq.MediaType(contentType)
	switch {
	case len(b) == 0:
		return body{Kind: "empty"}
	case mt == encryptedType:
		return body{Kind: "encrypted", Text: encryptedNote(b)}
	case acemq.JSON().Claims(contentType):
		var buf bytes.Buffer
		if json.Indent(&buf, b, "", "  ") == nil {
			return cut("json", buf.String())
		}
	case acemq.Text().Claims(contentType):
		if utf8.Valid(b) {
			return cut("text", string(b))
		}
	default:
		if c, ok := codecFor(mt); ok {
			var v any
			if c.Decode(contentType, b, &v) == nil {
				if out, err := json.MarshalIndent(v, "", "  "); err == nil {
					return cut("codec "+c.Name(), string(out))
				}
			}
		}
		if utf8.Valid(b) && !bytes.ContainsRune(b, 0) {
			return cut("text", string(b))
		}
	}
	n := min(len(b), 4096)
	return body{Kind: "binary", Text: fmt.Sprintf("%d bytes, %s\n%s", len(b), describe(contentType), hex.Dump(b[:n])), Cut: n < len(b)}
}

// cut escapes s by the one rule for bodies (safetext.Block: control
// characters shown as \x1b and the like, lines kept) and keeps its start.
func cut(kind, s string) body {
	if len(s) > maxShown {
		s = s[:maxShown]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		return body{Kind: kind, Text: safetext.Block(s), Cut: true}
	}
	return body{Kind: kind, Text: safetext.Block(s)}
}

// clipped is a one-line value from a message for a table cell: escaped
// by the one rule with the escapes marked (marked) and, when long, cut to
// its start; Full (escaped, itself cut at 4,096 characters) is for the
// cell's title, the message page shows all.
type clipped struct {
	Short template.HTML
	Full  string
	Cut   bool
}

const (
	clipCell  = 160
	clipTitle = 4096
)

func clip(raw string) clipped {
	s := safetext.Line(raw)
	full, cutFull := runePrefix(s, clipTitle)
	if cutFull {
		full += "…"
	}
	_, cutShort := runePrefix(s, clipCell)
	return clipped{Short: marked(raw, clipCell), Full: full, Cut: cutShort}
}

// runePrefix is s's first n characters, and whether s was longer.
func runePrefix(s string, n int) (string, bool) {
	i := 0
	for j := range s {
		if i == n {
			return s[:j], true
		}
		i++
	}
	return s, false
}

// quote is s in double quotes, escaped by the one rule (safetext.Line),
// for sentences that name a value from a request or a message.
func quote(s string) string { return `"` + safetext.Line(s) + `"` }

func describe(contentType string) string {
	if contentType == "" {
		return "no content type"
	}
	return "content type " + safetext.Line(contentType)
}

// codecFor finds a registered codec for a media type by the names codecs
// register under: the structured suffix (+xml → xml) or the subtype's
// last word (application/x-yaml → yaml, application/vnd.acemq.avro →
// avro). Only one that claims the content type is used.
func codecFor(mt string) (acemq.Codec, bool) {
	_, sub, _ := strings.Cut(mt, "/")
	var names []string
	if _, suffix, ok := strings.Cut(sub, "+"); ok {
		names = append(names, suffix)
	}
	word := sub
	if i := strings.LastIndexAny(word, ".-"); i >= 0 {
		word = word[i+1:]
	}
	names = append(names, word, sub)
	for _, n := range names {
		if c, ok := acemq.CodecByName(n); ok && c.Claims(mt) {
			return c, true
		}
	}
	return nil, false
}

// encryptedNote reads the key id from the encryption framing (contract
// §2.3): 0xAE, version, key-id length, key id, nonce, ciphertext.
func encryptedNote(b []byte) string {
	if len(b) < 4 || b[0] != 0xAE || int(b[2]) == 0 || len(b) < 3+int(b[2]) {
		return fmt.Sprintf("encrypted (%d bytes), but the framing does not read (no 0xAE magic or a short key id); the raw bytes link has them", len(b))
	}
	id := b[3 : 3+int(b[2])]
	return fmt.Sprintf("encrypted with key id %s (format %d, %d bytes); the console holds no key, so the body stays sealed", quote(string(id)), b[1], len(b))
}

// headerLine is one header as the message page lists it.
type headerLine struct {
	Name  string
	Value string
	Trace string // a tracing UI link for traceparent, when configured
}

// maxHeaderShown bounds a header value the message page shows.
const maxHeaderShown = 4096

// headerLines renders every header, sorted by name, tables and arrays
// (x-death) spelled out.
func headerLines(h map[string]any, traceURL string) []headerLine {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]headerLine, 0, len(names))
	for _, k := range names {
		v := formatValue(h[k], "")
		shown := v
		if cut, more := runePrefix(v, maxHeaderShown); more {
			shown = cut + fmt.Sprintf("\n… (cut here: %d characters in all; the download has it whole)", utf8.RuneCountInString(v))
		}
		l := headerLine{Name: safetext.Line(k), Value: safetext.Block(shown)}
		if k == "traceparent" && traceURL != "" {
			if id := traceID(v); id != "" {
				l.Trace = strings.ReplaceAll(traceURL, "{traceId}", id)
			}
		}
		out = append(out, l)
	}
	return out
}

// traceID reads the trace id from a W3C traceparent value.
func traceID(tp string) string {
	parts := strings.Split(strings.TrimSpace(tp), "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	if _, err := hex.DecodeString(parts[1]); err != nil {
		return ""
	}
	return parts[1]
}

// formatValue spells a header value out; nested tables and arrays (as in
// x-death) indent.
func formatValue(v any, indent string) string {
	switch x := v.(type) {
	case nil:
		return "(null)"
	case string:
		return x
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return hex.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case []any:
		var b strings.Builder
		for i, e := range x {
			fmt.Fprintf(&b, "\n%s[%d] %s", indent, i, formatValue(e, indent+"    "))
		}
		return b.String()
	case map[string]any:
		return formatTable(x, indent)
	case transport.Table:
		return formatTable(x, indent)
	default:
		if t, ok := asTable(v); ok {
			return formatTable(t, indent)
		}
		return fmt.Sprint(v)
	}
}

func formatTable(t map[string]any, indent string) string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n%s%s: %s", indent, k, formatValue(t[k], indent+"    "))
	}
	return b.String()
}

// asTable reads a named map type (a transport's table) as a map.
func asTable(v any) (map[string]any, bool) {
	b, err := json.Marshal(v)
	if err != nil || len(b) == 0 || b[0] != '{' {
		return nil, false
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil, false
	}
	return m, true
}

// age renders a duration for people: 45s, 12m, 3h 5m, 2d 4h.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

func growthText(perMinute float64) string {
	switch {
	case perMinute > 0.05:
		return fmt.Sprintf("+%.1f/min", perMinute)
	case perMinute < -0.05:
		return fmt.Sprintf("%.1f/min", perMinute)
	default:
		return "steady"
	}
}
