package replay

import (
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
)

func TestFilterSelectsOnEnvelopeHeadersAndBody(t *testing.T) {
	env := acemq.NewEnvelope()
	env.Type = "OrderPlaced"
	env.Error = "timeout talking to the warehouse"
	env.Attempt = 5
	env, err := env.WithHeader("tenant", "acme")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"order":"o-7"}`)
	for _, c := range []struct {
		expr string
		want bool
	}{
		{``, true},
		{`type == "OrderPlaced"`, true},
		{`type != "OrderPlaced"`, false},
		{`error ~ "timeout"`, true},
		{`error !~ "timeout"`, false},
		{`attempt >= 5 && attempt < 6`, true},
		{`attempt > 5`, false},
		{`header.tenant == "acme" and body ~ "o-7"`, true},
		{`header.missing == "x" || type == "Other"`, false},
		{`!(type == "Other")`, true},
		{`not (error ~ "timeout") or attempt == 5`, true},
		{`version == 1`, true},
	} {
		f, err := ParseFilter(c.expr)
		if err != nil {
			t.Fatalf("%q: %v", c.expr, err)
		}
		if got := f(env, body); got != c.want {
			t.Errorf("%q = %v, want %v", c.expr, got, c.want)
		}
	}
}

func TestFilterThatDoesNotParseSaysWhereAndWhat(t *testing.T) {
	for expr, want := range map[string]string{
		`type ==`:               `after type ==`,
		`type = "x"`:            `"=" at position 6`,
		`colour == "red"`:       `unknown field "colour"`,
		`error ~ 3`:             `quote the value`,
		`type == "x" &&`:        `expected a field name`,
		`(type == "x"`:          `expected )`,
		`type == "x" type`:      `join conditions with && or ||`,
		`error ~ "unterminated`: `not closed`,
	} {
		_, err := ParseFilter(expr)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "; fix it") {
			t.Errorf("%q: error %v, want one containing %q and what to do", expr, err, want)
		}
	}
}
