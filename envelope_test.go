package acemq

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/header"
)

func isUUIDv4(s string) bool {
	if len(s) != 36 || s[14] != '4' || !strings.ContainsRune("89ab", rune(s[19])) {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdef", r) {
				return false
			}
		}
	}
	return true
}

func TestNewEnvelopeHasSenderDefaults(t *testing.T) {
	before := time.Now().Add(-time.Millisecond)
	e := NewEnvelope()
	if !isUUIDv4(e.ID) {
		t.Errorf("id %q is not a lowercase hyphenated UUID v4", e.ID)
	}
	if e.CorrelationID != e.ID || e.Version != 1 || e.Attempt != 1 || e.CausationID != "" {
		t.Errorf("defaults: %+v", e)
	}
	if e.FirstSeen.Before(before) || e.FirstSeen.After(time.Now()) || e.FirstSeen.Nanosecond()%1e6 != 0 {
		t.Errorf("first-seen %v is not now at millisecond precision", e.FirstSeen)
	}
	if NewEnvelope().ID == e.ID {
		t.Error("two envelopes share an id")
	}
	if err := e.Validate(); err != nil {
		t.Errorf("a new envelope does not validate: %v", err)
	}
}

func TestHeaderReservedNameIsRefusedWithContractSentence(t *testing.T) {
	e := NewEnvelope()
	got, err := e.WithHeader("x-acemq-tenant", "acme")
	const want = `acemq: header "x-acemq-tenant" is in the reserved "x-acemq-" namespace and would be dropped on consume; use a namespace of your own, such as x-yourcompany-`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	var rh *ReservedHeaderError
	if !errors.As(err, &rh) || rh.Name != "x-acemq-tenant" {
		t.Errorf("errors.As did not reach *ReservedHeaderError: %v", err)
	}
	if len(got.Headers()) != 0 || got.ID != e.ID {
		t.Errorf("refused header changed the envelope: %+v", got)
	}
}

func TestHeaderPrefixTestIsCaseSensitiveAndAcemqDashIsNotReserved(t *testing.T) {
	for _, name := range []string{"acemq-replayed-from", "X-AceMQ-Tenant", "x-acemq", "x-tenant"} {
		e, err := NewEnvelope().WithHeader(name, "v")
		if err != nil {
			t.Errorf("SendOptions{Headers: %q} refused: %v", name, err)
		}
		if v, ok := e.Header(name); !ok || v != "v" {
			t.Errorf("SendOptions{Headers: %q} did not set it", name)
		}
	}
}

func TestHeaderEmptyNameAndNilValueAreRefused(t *testing.T) {
	if _, err := NewEnvelope().WithHeader("", "v"); err == nil || !strings.HasPrefix(err.Error(), "acemq: ") {
		t.Errorf("empty name: err = %v", err)
	}
	if _, err := NewEnvelope().WithHeader("x-a", nil); err == nil || !strings.HasPrefix(err.Error(), "acemq: ") {
		t.Errorf("nil value: err = %v", err)
	}
}

func TestHeaderBulkCopySkipsReservedNames(t *testing.T) {
	e := NewEnvelope().WithHeaders(map[string]any{
		"x-tenant": "acme", "x-acemq-id": "forged", "acemq-replay-count": int64(1), "x-nil": nil,
	})
	h := e.Headers()
	if v, ok := h["x-nil"]; len(h) != 3 || h["x-tenant"] != "acme" || h["acemq-replay-count"] != int64(1) || !ok || v != nil {
		t.Errorf("headers = %v, want x-tenant, acemq-replay-count and the null x-nil", h)
	}
	if r := e.render(); r[header.ID] != e.ID {
		t.Errorf("rendered id = %v, want %s", r[header.ID], e.ID)
	}
}

func TestEnvelopeWithMethodsNeverChangeTheOriginal(t *testing.T) {
	orig, _ := NewEnvelope().WithHeader("x-a", "1")
	orig.Route = []string{"a", "b"}
	hdr, _ := orig.WithHeader("x-b", "2")
	bulk := orig.WithHeaders(map[string]any{"x-c": "3"})
	without := orig.WithoutHeader("x-a")
	next := orig.nextAttempt()
	next.Route[0] = "changed"
	hdr.Route[1] = "changed"
	headersCopy := orig.Headers()
	headersCopy["x-z"] = "leak"

	if len(orig.Headers()) != 1 || orig.Route[0] != "a" || orig.Route[1] != "b" || orig.Attempt != 1 {
		t.Errorf("original changed: %+v headers %v", orig, orig.Headers())
	}
	if _, ok := hdr.Header("x-b"); !ok {
		t.Error("SendOptions.Headers lost its header")
	}
	if _, ok := bulk.Header("x-c"); !ok {
		t.Error("WithHeaders lost its header")
	}
	if _, ok := without.Header("x-a"); ok {
		t.Error("WithoutHeader kept the header")
	}
	if next.Attempt != 2 || next.ID != orig.ID {
		t.Errorf("NextAttempt = %+v", next)
	}
}

func TestEnvelopeCausedByTakesLineageFromParent(t *testing.T) {
	parent := NewEnvelope()
	parent.CorrelationID = "corr-9"
	parent.Attempt = 4
	tmpl, _ := Envelope{Type: "shipment.requested", Version: 2, Origin: "ship@h", Error: "old"}.WithHeader("x-tenant", "acme")
	child := tmpl.CausedBy(parent)
	if child.ID == parent.ID || !isUUIDv4(child.ID) || child.CorrelationID != "corr-9" ||
		child.CausationID != parent.ID || child.Attempt != 1 || child.Type != "shipment.requested" ||
		child.Version != 2 || child.Error != "" || child.Origin != "ship@h" || child.FirstSeen.IsZero() {
		t.Errorf("CausedBy = %+v", child)
	}
	if v, _ := child.Header("x-tenant"); v != "acme" {
		t.Error("CausedBy lost this envelope's headers")
	}
	if zero := (Envelope{}).CausedBy(parent); zero.Version != 1 || zero.Validate() != nil {
		t.Errorf("zero template: %+v", zero)
	}
}

func TestEnvelopeValidateRefusesWithoutCorrecting(t *testing.T) {
	ok := NewEnvelope()
	tests := []struct {
		name   string
		change func(*Envelope)
		bad    bool
	}{
		{"new envelope", func(*Envelope) {}, false},
		{"version 0", func(e *Envelope) { e.Version = 0 }, true},
		{"attempt 0", func(e *Envelope) { e.Attempt = 0 }, true},
		{"negative attempt", func(e *Envelope) { e.Attempt = -1 }, true},
		{"valid route", func(e *Envelope) { e.Route = []string{"a", "b"}; e.RoutePosition = 1 }, false},
		{"route with no step", func(e *Envelope) { e.Route = []string{} }, true},
		{"blank step", func(e *Envelope) { e.Route = []string{"a", " "} }, true},
		{"comma in step", func(e *Envelope) { e.Route = []string{"a,b"} }, true},
		{"negative position", func(e *Envelope) { e.Route = []string{"a"}; e.RoutePosition = -1 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ok
			tt.change(&e)
			before := e
			err := e.Validate()
			if (err != nil) != tt.bad {
				t.Fatalf("Validate = %v, want error %v", err, tt.bad)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "acemq: ") {
				t.Errorf("error %q does not start acemq: ", err)
			}
			if e.Version != before.Version || e.Attempt != before.Attempt {
				t.Error("Validate corrected the envelope")
			}
		})
	}
}

func TestEnvelopeRenderWritesOnlyNonEmptyAndEngineHeadersWin(t *testing.T) {
	e := NewEnvelope()
	e.Type, e.Origin = "t", "svc@host"
	e = e.WithHeaders(map[string]any{"x-tenant": "acme", header.ReplyTo: "app-value"})
	r := e.render()
	for _, name := range []string{header.Causation, header.Error, header.Claim, header.Route, header.RoutePosition, header.RouteID} {
		if v, ok := r[name]; ok {
			t.Errorf("empty %s written as %#v", name, v)
		}
	}
	for _, name := range []string{header.ID, header.Type, header.Version, header.Correlation, header.Attempt, header.FirstSeen, header.Origin, "x-tenant"} {
		if _, ok := r[name]; !ok {
			t.Errorf("%s not written", name)
		}
	}
	if _, ok := r[header.FirstSeen].(int64); !ok {
		t.Errorf("first-seen written as %T, want int64", r[header.FirstSeen])
	}
	if v, ok := r[header.ReplyTo]; ok {
		t.Errorf("application acemq-reply-to written without a ReplyTo field: %#v", v)
	}

	e.ReplyTo = "reply.q"
	e.Route, e.RoutePosition, e.RouteID = []string{"a", "b"}, 1, "rid"
	e.CausationID, e.Error, e.Claim = "c", "why", "s3://x"
	r = e.render()
	if r[header.ReplyTo] != "reply.q" {
		t.Errorf("engine reply-to lost to the application header: %v", r[header.ReplyTo])
	}
	if r[header.Route] != "a,b" || r[header.RouteID] != "rid" || r[header.Causation] != "c" || r[header.Error] != "why" || r[header.Claim] != "s3://x" {
		t.Errorf("render = %v", r)
	}
	if n, _ := readInt(r[header.RoutePosition]); n != 1 {
		t.Errorf("route position = %#v", r[header.RoutePosition])
	}
	back := readEnvelope(r, "", "", "")
	if back.ReplyTo != "reply.q" || back.RoutePosition != 1 || len(back.Route) != 2 || !back.FirstSeen.Equal(e.FirstSeen) {
		t.Errorf("round trip = %+v", back)
	}
}

func TestValidateRefusesTextThatIsNotUTF8(t *testing.T) {
	e := NewEnvelope()
	e.ID = "\xff\xfe"
	if err := e.Validate(); err == nil || !strings.Contains(err.Error(), "acemq: envelope id") || !strings.Contains(err.Error(), "not UTF-8") {
		t.Fatalf("Validate = %v, want the not-UTF-8 refusal naming the id", err)
	}
	e = NewEnvelope()
	e.Route = []string{"a", "\xff"}
	if err := e.Validate(); err == nil || !strings.Contains(err.Error(), "not UTF-8") {
		t.Fatalf("Validate = %v, want the not-UTF-8 refusal for a route step", err)
	}
}
