package acemq_test

import (
	"fmt"
	"testing"

	"github.com/acemq-go/acemq"
)

func TestMediaTypeDropsParametersSpaceAndCase(t *testing.T) {
	for in, want := range map[string]string{
		"":                                 "",
		"  ":                               "",
		"application/json":                 "application/json",
		" Application/XML ; charset=utf-8": "application/xml",
		"text/plain;charset=utf-8":         "text/plain",
		";q=1":                             "",
	} {
		if got := acemq.MediaType(in); got != want {
			t.Errorf("MediaType(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMatchesMediaTypeFollowsTheContractRule(t *testing.T) {
	xml := []string{"application/xml", "text/xml"}
	for _, c := range []struct {
		ct   string
		want bool
	}{
		{"application/xml", true},
		{"TEXT/XML; charset=utf-8", true},
		{"application/vnd.acme.order+xml", true},
		{"application/+xml", false}, // no subtype before the suffix
		{"/vnd+xml", false},         // no type
		{"application/a/b+xml", false},
		{"application/xmlx", false},
		{"application/json", false},
		{"", false}, // only JSON claims an absent content type
	} {
		if got := acemq.MatchesMediaType(c.ct, "+xml", xml...); got != c.want {
			t.Errorf("MatchesMediaType(%q) = %v, want %v", c.ct, got, c.want)
		}
	}
	if acemq.MatchesMediaType("application/vnd.x+xml", "", xml...) {
		t.Error("an empty suffix matched a structured-syntax type")
	}
}

// A user codec decides what it reads with the same rule as the built-in
// ones.
func ExampleMatchesMediaType() {
	claims := func(contentType string) bool {
		return acemq.MatchesMediaType(contentType, "+csv", "text/csv")
	}
	fmt.Println(claims("text/csv; header=present"), claims("application/vnd.acme.rows+csv"), claims("text/plain"))
	// Output: true true false
}
