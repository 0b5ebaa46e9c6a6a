// Package redact shows a broker or database address to a person without
// its password: the one rule every error, log line and command output of
// the module uses.
package redact

import (
	"regexp"
	"strings"
)

// Mask is what stands in for a password.
const Mask = "***"

// start finds where an address begins inside a string that may hold
// several, comma- or space-separated: a scheme and "://" at the start or
// after a separator.
var start = regexp.MustCompile(`(^|[,\s])[A-Za-z][A-Za-z0-9+.-]*://`)

// URL returns raw with every password replaced by Mask. It works on the
// text, not on a parse, so it never prints a password whether or not raw
// is a valid URL: a password holding a space, "@", "/", "?", "#", a bad
// %-escape or a ":" is hidden as well as a clean one.
//
// The rule: raw is cut into addresses where a scheme and "://" begin
// (a list of cluster addresses holds several). In each, everything from
// the "://" up to the last "@" is user information; the user name (the
// text before its first ":") is kept and the rest becomes Mask, so
// "amqp://app:s3cret@host:5672/vh" is shown as "amqp://app:***@host:5672/vh".
// An address without "@" has no user information and is kept as it is. A
// string with no "://" at all (a MySQL DSN, "user:pass@tcp(host)/db") has
// everything before its last "@" replaced. When an "@" sits after the
// host too (in a path or query), the host is hidden with the password:
// the rule hides too much rather than too little.
func URL(raw string) string {
	locs := start.FindAllStringIndex(raw, -1)
	if len(locs) == 0 {
		at := strings.LastIndex(raw, "@")
		if at < 0 {
			return raw
		}
		return Mask + raw[at:]
	}
	var b strings.Builder
	b.Grow(len(raw))
	b.WriteString(raw[:locs[0][0]])
	for i, loc := range locs {
		end := len(raw)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		one(&b, raw[loc[0]:end])
	}
	return b.String()
}

// one writes a single address (from its separator or scheme to the next
// address) with its password masked.
func one(b *strings.Builder, s string) {
	sep := strings.Index(s, "://") + len("://")
	rest := s[sep:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		b.WriteString(s)
		return
	}
	b.WriteString(s[:sep])
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	b.WriteString(user)
	if hasPassword {
		b.WriteString(":" + Mask)
	}
	b.WriteString(rest[at:])
}
