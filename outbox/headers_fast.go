package outbox

import (
	"encoding/json"
	"unicode/utf8"
)

// decodeHeadersFast reads stored headers in the form a relay reads on
// every record — an object whose values are strings, booleans, and typed
// numbers or strings ({"int32":1}, {"time":"…"}), without escapes — in
// one pass over the text, without encoding/json's reflection (a fifth of
// the relay's CPU per record went to reading headers). ok is false for
// anything else: a nested table or array, an escape, a number that is not
// a plain integer, a value decodeTyped refuses, text that is not JSON or
// has more after the object. decodeHeaders then reads it the general way,
// so the two never disagree: what this accepts, it reads as the general
// way does (FuzzDecodeHeadersFastAgrees).
func decodeHeadersFast(s string) (h map[string]any, ok bool) {
	p := headerScanner{s: s}
	if !p.skip('{') {
		return nil, false
	}
	h = make(map[string]any, 12)
	if p.skip('}') {
		return h, p.end()
	}
	for {
		k, ok := p.str()
		if !ok || !p.skip(':') {
			return nil, false
		}
		p.ws()
		if p.i >= len(p.s) {
			return nil, false
		}
		switch p.s[p.i] {
		case '"':
			v, ok := p.str()
			if !ok {
				return nil, false
			}
			h[k] = v
		case 't', 'f':
			v, ok := p.boolean()
			if !ok {
				return nil, false
			}
			h[k] = v
		case '{':
			p.i++
			typ, ok := p.str()
			if !ok || !p.skip(':') {
				return nil, false
			}
			var inner any
			p.ws()
			if p.i < len(p.s) && p.s[p.i] == '"' {
				inner, ok = p.str()
			} else {
				var n string
				n, ok = p.integer()
				inner = json.Number(n)
			}
			if !ok || !p.skip('}') {
				return nil, false
			}
			v, err := decodeTyped(typ, inner)
			if err != nil {
				return nil, false
			}
			h[k] = v
		default:
			return nil, false
		}
		if p.skip(',') {
			continue
		}
		if p.skip('}') {
			return h, p.end()
		}
		return nil, false
	}
}

// headerScanner reads JSON tokens from s at i.
type headerScanner struct {
	s string
	i int
}

// ws skips JSON white space.
func (p *headerScanner) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// skip reads c after white space; false (nothing read) when c is not next.
func (p *headerScanner) skip(c byte) bool {
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (p *headerScanner) end() bool {
	p.ws()
	return p.i == len(p.s)
}

// str reads a string without escapes or control characters, whose bytes
// are valid UTF-8 (encoding/json would replace invalid bytes), and
// returns it as a part of s.
func (p *headerScanner) str() (string, bool) {
	p.ws()
	if p.i >= len(p.s) || p.s[p.i] != '"' {
		return "", false
	}
	ascii := true
	for j := p.i + 1; j < len(p.s); j++ {
		switch c := p.s[j]; {
		case c == '"':
			v := p.s[p.i+1 : j]
			if !ascii && !utf8.ValidString(v) {
				return "", false
			}
			p.i = j + 1
			return v, true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
	}
	return "", false
}

// boolean reads true or false.
func (p *headerScanner) boolean() (bool, bool) {
	for _, w := range [...]string{"true", "false"} {
		if len(p.s)-p.i >= len(w) && p.s[p.i:p.i+len(w)] == w {
			p.i += len(w)
			return w == "true", true
		}
	}
	return false, false
}

// integer reads a JSON number that is a plain integer (-?(0|[1-9][0-9]*)),
// not followed by a fraction or an exponent.
func (p *headerScanner) integer() (string, bool) {
	start, j := p.i, p.i
	if j < len(p.s) && p.s[j] == '-' {
		j++
	}
	switch {
	case j < len(p.s) && p.s[j] == '0':
		j++
	case j < len(p.s) && p.s[j] >= '1' && p.s[j] <= '9':
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
	default:
		return "", false
	}
	if j < len(p.s) {
		switch c := p.s[j]; {
		case c == '.', c == 'e', c == 'E', c >= '0' && c <= '9':
			return "", false
		}
	}
	p.i = j
	return p.s[start:j], true
}
