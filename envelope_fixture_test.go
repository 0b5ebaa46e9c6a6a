package acemq

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

type envelopeFixtures struct {
	GeneratedBy string `json:"generatedBy"`
	Cases       []struct {
		Case        string         `json:"case"`
		RoutingKey  string         `json:"routingKey"`
		MessageID   string         `json:"messageId"`
		Body        string         `json:"body"`
		ContentType string         `json:"contentType"`
		Headers     map[string]any `json:"headers"`
	} `json:"cases"`
}

func loadEnvelopeFixtures(t *testing.T) envelopeFixtures {
	t.Helper()
	var f envelopeFixtures
	if err := json.Unmarshal(testenv.Fixture(t, "envelope-fixtures.json"), &f); err != nil {
		t.Fatalf("envelope-fixtures.json is not JSON: %v", err)
	}
	if f.GeneratedBy != "acemq-java-amqp FixtureGen" {
		t.Fatalf("generatedBy = %q, want the Java FixtureGen", f.GeneratedBy)
	}
	if len(f.Cases) < 3 {
		t.Fatalf("expected at least 3 cases, got %d", len(f.Cases))
	}
	return f
}

// fixtureEnvelope is what each case must read as. Run-dependent fields of
// `minimal` are taken from its headers (round-trip input, not expectations).
type fixtureEnvelope struct {
	ID, Type, Correlation, Causation, Origin string
	Version, Attempt                         int
	FirstSeen                                time.Time
	AppHeaders                               []string
}

var fixtureFirstSeen = time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)

var fixtureExpectations = map[string]fixtureEnvelope{
	"minimal": {Type: "fx.plain", Version: 1, Attempt: 1},
	"populated": {
		ID: "11111111-2222-3333-4444-555555555555", Type: "order.placed", Correlation: "corr-1",
		Causation: "cause-1", Origin: "orders@host-7", Version: 3, Attempt: 1,
		FirstSeen: fixtureFirstSeen, AppHeaders: []string{"x-tenant"},
	},
	"replayed": {
		ID: "99999999-8888-7777-6666-555555555555", Type: "order.placed", Correlation: "corr-2",
		Origin: "orders@host-7", Version: 1, Attempt: 1, FirstSeen: fixtureFirstSeen,
		AppHeaders: []string{"acemq-replay-count", "acemq-replayed-at", "acemq-replayed-from"},
	},
}

func TestFixtureEnvelopesReadCheckAndRenderHeaderByHeader(t *testing.T) {
	f := loadEnvelopeFixtures(t)
	for _, c := range f.Cases {
		t.Run(c.Case, func(t *testing.T) {
			want, ok := fixtureExpectations[c.Case]
			if !ok {
				t.Fatalf("unknown fixture case %q: add its expectations", c.Case)
			}
			if c.Case == "minimal" {
				want.ID = c.Headers[header.ID].(string)
				want.Correlation = c.Headers[header.Correlation].(string)
				want.Origin = c.Headers[header.Origin].(string)
				want.FirstSeen = time.UnixMilli(int64(c.Headers[header.FirstSeen].(float64))).UTC()
				if want.ID != c.MessageID || want.Correlation != want.ID {
					t.Fatalf("minimal: id %q, message-id %q, correlation %q should all agree", want.ID, c.MessageID, want.Correlation)
				}
				if want.Origin == "" || want.FirstSeen.Year() < 2020 {
					t.Fatalf("minimal: origin %q / first-seen %v are not plausible", want.Origin, want.FirstSeen)
				}
			}

			e := readEnvelope(transport.Table(c.Headers), c.RoutingKey, c.MessageID, "")
			checkFixtureEnvelope(t, e, want)

			got := e.render()
			for name, wv := range c.Headers {
				gv, ok := got[name]
				if !ok {
					t.Errorf("render dropped header %s (want %v)", name, wv)
					continue
				}
				if !sameHeaderValue(gv, wv) {
					t.Errorf("header %s = %#v, want %#v", name, gv, wv)
				}
			}
			for name, gv := range got {
				if _, ok := c.Headers[name]; !ok {
					t.Errorf("render added header %s = %#v, which the fixture does not carry", name, gv)
				}
			}

			// The rendered table reads back as the same envelope.
			checkFixtureEnvelope(t, readEnvelope(got, c.RoutingKey, c.MessageID, ""), want)

			// The body is a JSON string literal carrying JSON.
			var body string
			if err := JSON().Decode(c.ContentType, []byte(c.Body), &body); err != nil {
				t.Fatalf("JSON codec cannot decode the fixture body %s: %v", c.Body, err)
			}
			if !strings.HasPrefix(body, `{"id":"o-`) {
				t.Errorf("decoded body = %q, want the JSON text {\"id\":\"o-…\"}", body)
			}
		})
	}
}

func checkFixtureEnvelope(t *testing.T, e Envelope, want fixtureEnvelope) {
	t.Helper()
	for _, c := range []struct{ field, got, want string }{
		{"ID", e.ID, want.ID}, {"Type", e.Type, want.Type}, {"CorrelationID", e.CorrelationID, want.Correlation},
		{"CausationID", e.CausationID, want.Causation}, {"Origin", e.Origin, want.Origin},
		{"Error", e.Error, ""}, {"Claim", e.Claim, ""}, {"RouteID", e.RouteID, ""}, {"ReplyTo", e.ReplyTo, ""},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.field, c.got, c.want)
		}
	}
	if e.Version != want.Version || e.Attempt != want.Attempt {
		t.Errorf("version/attempt = %d/%d, want %d/%d", e.Version, e.Attempt, want.Version, want.Attempt)
	}
	if !e.FirstSeen.Equal(want.FirstSeen) {
		t.Errorf("FirstSeen = %v, want %v", e.FirstSeen, want.FirstSeen)
	}
	if e.Route != nil || e.RoutePosition != 0 {
		t.Errorf("route = %v@%d, want none", e.Route, e.RoutePosition)
	}
	var names []string
	for name := range e.Headers() {
		names = append(names, name)
	}
	if !sameSet(names, want.AppHeaders) {
		t.Errorf("application headers = %v, want %v", names, want.AppHeaders)
	}
}

func TestFixtureReplayedCaseCarriesReplayStamps(t *testing.T) {
	f := loadEnvelopeFixtures(t)
	for _, c := range f.Cases {
		if c.Case != "replayed" {
			continue
		}
		e := readEnvelope(transport.Table(c.Headers), c.RoutingKey, c.MessageID, "")
		at, ok := ReplayedAt(e)
		want := time.Date(2026, 2, 3, 4, 5, 6, 789e6, time.UTC)
		if !ok || !at.Equal(want) {
			t.Errorf("ReplayedAt = %v, %v; want %v (the stale copy's epoch millis)", at, ok, want)
		}
		if n := ReplayCount(e); n != 2 {
			t.Errorf("ReplayCount = %d, want 2", n)
		}
		if from, _ := e.Header(header.ReplayedFrom); from != "orders.new.dlq" {
			t.Errorf("acemq-replayed-from = %v, want orders.new.dlq", from)
		}
		return
	}
	t.Fatal("the fixture has no replayed case")
}

// The newer Java generator's `claimed` case, which this stale copy lacks
// (fixtures/README.md), written out by hand.
func TestFixtureClaimedCaseRoundTrips(t *testing.T) {
	headers := transport.Table{
		header.Attempt:     int32(1),
		header.Claim:       "s3://payloads/orders/o-4",
		header.Correlation: "corr-3",
		header.FirstSeen:   int64(1767323045678),
		header.ID:          "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
		header.Origin:      "orders@host-7",
		header.Type:        "fx.claimed",
		header.Version:     int32(1),
	}
	e := readEnvelope(headers, "fx.claimed", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "")
	if e.Claim != "s3://payloads/orders/o-4" || e.ID != "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee" ||
		e.CorrelationID != "corr-3" || e.Origin != "orders@host-7" || e.Type != "fx.claimed" ||
		!e.FirstSeen.Equal(fixtureFirstSeen) || e.Version != 1 || e.Attempt != 1 {
		t.Fatalf("claimed case read as %+v", e)
	}
	if len(e.Headers()) != 0 {
		t.Errorf("claimed case has application headers %v, want none", e.Headers())
	}
	got := e.render()
	if !reflect.DeepEqual(normaliseHeaders(got), normaliseHeaders(headers)) {
		t.Errorf("render = %v, want %v", got, headers)
	}
	var body map[string]string
	if err := JSON().Decode("application/json", []byte(`{"id":"o-4"}`), &body); err != nil || body["id"] != "o-4" {
		t.Errorf("claimed body decoded as %v, %v", body, err)
	}
}

// sameHeaderValue compares a rendered value with a fixture value: integers
// by value (JSON numbers arrive as float64), strings exactly.
func sameHeaderValue(got, want any) bool {
	if wf, ok := want.(float64); ok {
		gi, ok := readInt(got)
		switch got.(type) {
		case string, []byte:
			return false
		}
		return ok && float64(gi) == wf
	}
	return reflect.DeepEqual(got, want)
}

// normalise turns every integer into int64 so tables compare by value.
func normaliseHeaders(t transport.Table) map[string]any {
	out := make(map[string]any, len(t))
	for k, v := range t {
		switch v.(type) {
		case string, []byte:
			out[k] = v
		default:
			if n, ok := readInt(v); ok {
				out[k] = n
			} else {
				out[k] = v
			}
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		if seen[x] == 0 {
			return false
		}
		seen[x]--
	}
	return true
}
