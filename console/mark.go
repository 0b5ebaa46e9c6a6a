package console

import (
	"html/template"
	"strings"
	"unicode/utf8"

	"github.com/acemq-go/acemq/console/internal/safetext"
)

// A name or an id is shown with the one rule (safetext), and every escape
// is marked (<span class="esc">), so that a queue named "shop.<U+202E>gpj.dlq"
// and one literally named `shop.\u202egpj.dlq` never look alike, and a
// zero-width character is seen. Links and API values carry the real name,
// percent-encoded in a URL.

// part is one piece of a value as a page shows it: text shown as it is,
// or one escaped character (Esc).
type part struct {
	Text string `json:"t"`
	Esc  bool   `json:"e,omitempty"`
}

// parts splits s as safetext.Line shows it.
func parts(s string) []part {
	out := []part{}
	safetext.Segments(s, func(text string, esc bool) { out = append(out, part{text, esc}) })
	return out
}

// escTitle is the tooltip of a marked escape.
const escTitle = "an escaped character: the name holds this character, not these letters"

// marked renders s as HTML: text escaped for HTML, each character the
// rule escapes shown as its escape in a marked span. max > 0 keeps the
// first max characters of what is shown and adds "…".
func marked(s string, max int) template.HTML {
	var b strings.Builder
	shown := 0
	cut := false
	safetext.Segments(s, func(text string, esc bool) {
		if cut {
			return
		}
		n := utf8.RuneCountInString(text)
		if max > 0 && shown+n > max {
			if esc {
				cut = true
				return
			}
			text, _ = runePrefix(text, max-shown)
			n = max - shown
			cut = true
		}
		shown += n
		if esc {
			b.WriteString(`<span class="esc" title="` + escTitle + `">`)
			b.WriteString(template.HTMLEscapeString(text))
			b.WriteString(`</span>`)
			return
		}
		b.WriteString(template.HTMLEscapeString(text))
	})
	if cut {
		b.WriteString("…")
	}
	return template.HTML(b.String()) // every piece escaped above
}
