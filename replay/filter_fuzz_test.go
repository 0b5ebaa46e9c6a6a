package replay

import (
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/header"
)

// FuzzParseFilter compiles arbitrary filter text: a Predicate or an error,
// never a panic; a compiled Predicate runs on any envelope and body
// without panicking.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{
		``, `type == "OrderPlaced" && error ~ "timeout" && attempt >= 3`,
		`!(attempt < 2) || header.x-tenant == "a"`, `not body ~ "x" or version != 1`,
		`attempt >= 1e400`, `id == "\"`, `((((`, `header. == ""`, `attempt > -0x10`,
		`error ~ "ü" and origin !~ ""`, `correlation`, `== "a"`, `type == "a" &&`,
	} {
		f.Add(s, []byte(`{"id":"o-1"}`), "timeout after 3s", 3)
	}
	f.Fuzz(func(t *testing.T, src string, body []byte, errText string, attempt int) {
		p, err := ParseFilter(src)
		if err != nil {
			if p != nil {
				t.Fatalf("ParseFilter(%q) returned a Predicate with its error %v", src, err)
			}
			return
		}
		env := acemq.ReadEnvelope(map[string]any{
			header.Error: errText, header.Attempt: int64(attempt), "x-tenant": errText,
		}, "orders.new", "", "")
		p(env, body)
		p(acemq.Envelope{}, nil)
	})
}
