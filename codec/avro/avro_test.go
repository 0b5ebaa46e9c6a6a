package avro_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/codec/avro"
	"github.com/acemq-go/acemq/codec/avro/internal/codectest"
	"github.com/acemq-go/acemq/codec/avro/internal/dbtest"
	"github.com/acemq-go/acemq/codec/avro/internal/testenv"
	"github.com/acemq-go/acemq/codec/schemas"
	"go.uber.org/goleak"
)

// TestMain fails the package when a consumer started by a test outlives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixtureCase struct {
	Case         string          `json:"case"`
	SchemaID     uint32          `json:"schemaId"`
	WriterSchema string          `json:"writerSchema"`
	ReaderSchema string          `json:"readerSchema"`
	BodyBase64   string          `json:"bodyBase64"`
	Resolved     json.RawMessage `json:"resolved"`
	WriterShape  json.RawMessage `json:"writerShape"`
}

func fixtures(t *testing.T) []fixtureCase {
	var f struct {
		Cases []fixtureCase `json:"cases"`
	}
	if err := json.Unmarshal(testenv.Fixture(t, "avro-resolution-fixtures.json"), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) == 0 {
		t.Fatal("the Avro resolution fixture has no cases")
	}
	return f.Cases
}

// sameJSON compares a decoded value with the fixture's column as maps.
func sameJSON(t *testing.T, got any, want json.RawMessage) {
	t.Helper()
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	_ = json.Unmarshal(b, &g)
	_ = json.Unmarshal(want, &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("decoded %s, want %s", b, want)
	}
}

// TestTheJavaResolutionFixtureInBothColumns registers each writer schema
// under the fixture's id and decodes the Java body: without a reader
// schema Go lands in writerShape, with one in resolved.
func TestTheJavaResolutionFixtureInBothColumns(t *testing.T) {
	ctx := context.Background()
	for _, fc := range fixtures(t) {
		t.Run(fc.Case, func(t *testing.T) {
			reg := schemas.NewMemory()
			if err := reg.Import(ctx, schemas.Schema{ID: fc.SchemaID, Subject: "resolution", Version: 1, Format: avro.Format, Definition: fc.WriterSchema}); err != nil {
				t.Fatal(err)
			}
			body, err := base64.StdEncoding.DecodeString(fc.BodyBase64)
			if err != nil {
				t.Fatal(err)
			}
			plain, err := avro.RegistryReader(reg)
			if err != nil {
				t.Fatal(err)
			}
			for _, ct := range []string{avro.ContentTypeRegistry, "application/avro", ""} {
				var m map[string]any
				if err := plain.Decode(ct, body, &m); err != nil {
					t.Fatalf("content type %q: %v", ct, err)
				}
				sameJSON(t, m, fc.WriterShape)
			}
			resolving, err := avro.RegistryReader(reg, avro.ReaderSchema(fc.ReaderSchema))
			if err != nil {
				t.Fatal(err)
			}
			var a any
			if err := resolving.Decode(avro.ContentTypeRegistry, body, &a); err != nil {
				t.Fatal(err)
			}
			sameJSON(t, a, fc.Resolved)
		})
	}
}

// TestGoWritesTheJavaBytes: a Registered codec on the fixture's writer
// schema and id writes the Java body byte for byte.
func TestGoWritesTheJavaBytes(t *testing.T) {
	ctx := context.Background()
	for _, fc := range fixtures(t) {
		reg := schemas.NewMemory()
		if err := reg.Import(ctx, schemas.Schema{ID: fc.SchemaID, Subject: "resolution", Version: 1, Format: avro.Format, Definition: fc.WriterSchema}); err != nil {
			t.Fatal(err)
		}
		c, err := avro.Registered(ctx, reg, "resolution", fc.WriterSchema)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(fc.WriterShape, &m); err != nil {
			t.Fatal(err)
		}
		for k, v := range m {
			if f, ok := v.(float64); ok {
				m[k] = int(f)
			}
		}
		b, err := c.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := base64.StdEncoding.EncodeToString(b); got != fc.BodyBase64 {
			t.Fatalf("%s: Go wrote %s, Java wrote %s", fc.Case, got, fc.BodyBase64)
		}
	}
}

func TestAFixedSchemaOrderRoundTripsAndCrossReadsAsAMap(t *testing.T) {
	c, err := avro.New(codectest.OrderAvroSchema)
	if err != nil {
		t.Fatal(err)
	}
	in := codectest.SampleOrder()
	b, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	var out codectest.Order
	if err := c.Decode(avro.ContentTypeBinary, b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed the order:\n%+v\n%+v", in, out)
	}
	var m map[string]any
	if err := c.Decode("application/vnd.acme.order+avro", b, &m); err != nil || m["orderId"] != in.ID {
		t.Fatalf("as a map: %v, %v", m, err)
	}
}

func TestClaims(t *testing.T) {
	fixed, _ := avro.New(`"string"`)
	reg, _ := avro.RegistryReader(schemas.NewMemory())
	for ct, want := range map[string][2]bool{
		"avro/binary":                {true, false},
		"application/vnd.acemq.avro": {false, true},
		"application/avro":           {true, true},
		"application/x.order+avro":   {true, true},
		"":                           {false, false},
		"application/octet-stream":   {false, false},
	} {
		if fixed.Claims(ct) != want[0] || reg.Claims(ct) != want[1] {
			t.Errorf("Claims(%q): fixed %v, registry %v; want %v", ct, fixed.Claims(ct), reg.Claims(ct), want)
		}
	}
}

// §2.2: the fixed-schema codec believes the content type and never refuses
// a bare body for starting 0x00; it refuses application/vnd.acemq.avro.
func TestTheFixedCodecBelievesTheContentType(t *testing.T) {
	c, err := avro.New(`{"type":"record","name":"N","fields":[{"name":"n","type":"int"},{"name":"s","type":"string"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	body, err := c.Encode(map[string]any{"n": 0, "s": "abcd"}) // 00 08 61 62 63 64: starts 0x00, five bytes and more
	if err != nil || body[0] != 0 || len(body) < 5 {
		t.Fatalf("body % x, %v", body, err)
	}
	for _, ct := range []string{avro.ContentTypeBinary, "application/avro", "", "application/octet-stream"} {
		var m map[string]any
		if err := c.Decode(ct, body, &m); err != nil || m["s"] != "abcd" {
			t.Fatalf("content type %q: %v, %v", ct, m, err)
		}
	}
	var m map[string]any
	err = c.Decode(avro.ContentTypeRegistry, body, &m)
	if err == nil || !acemq.IsFatal(err) || !strings.Contains(err.Error(), "registry-framed") {
		t.Fatalf("Decode(vnd.acemq.avro) = %v; want a fatal refusal", err)
	}
}

// §2.2: the registry codec reads avro/binary as bare with its own schema,
// the registry content types as framed, and lets a leading 0x00 decide
// only for an absent or non-Avro content type.
func TestTheRegistryCodecFramingRules(t *testing.T) {
	ctx := context.Background()
	reg := schemas.NewMemory()
	schema := `{"type":"record","name":"N","fields":[{"name":"s","type":"string"}]}`
	c, err := avro.Registered(ctx, reg, "n", schema)
	if err != nil {
		t.Fatal(err)
	}
	fixed, _ := avro.New(schema)
	framed, _ := c.Encode(map[string]any{"s": "framed"})
	bare, _ := fixed.Encode(map[string]any{"s": "bare"})
	for _, tc := range []struct {
		ct   string
		body []byte
		want string
	}{
		{avro.ContentTypeRegistry, framed, "framed"},
		{"application/avro", framed, "framed"},
		{"", framed, "framed"},
		{"application/octet-stream", framed, "framed"},
		{avro.ContentTypeBinary, bare, "bare"},
		{"", bare, "bare"},
	} {
		var m map[string]any
		if err := c.Decode(tc.ct, tc.body, &m); err != nil || m["s"] != tc.want {
			t.Errorf("content type %q body % x: %v, %v; want %q", tc.ct, tc.body, m, err, tc.want)
		}
	}
	var m map[string]any
	if err := c.Decode(avro.ContentTypeRegistry, bare, &m); err == nil || !strings.Contains(err.Error(), "does not start with the registry framing") {
		t.Fatalf("a bare body labelled registry-framed = %v", err)
	}
}

func TestRegisteredRefusesABackwardIncompatibleChangeNamingTheField(t *testing.T) {
	ctx := context.Background()
	reg := schemas.NewMemory()
	v1 := `{"type":"record","name":"Order","fields":[{"name":"orderId","type":"string"},{"name":"total","type":"int"}]}`
	if _, err := avro.Registered(ctx, reg, "orders", v1); err != nil {
		t.Fatal(err)
	}
	v2ok := `{"type":"record","name":"Order","fields":[{"name":"orderId","type":"string"},{"name":"total","type":"long"},{"name":"currency","type":"string","default":"GBP"}]}`
	c2, err := avro.Registered(ctx, reg, "orders", v2ok)
	if err != nil {
		t.Fatalf("a default-bearing new field and int→long promotion were refused: %v", err)
	}
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"record","name":"Order","fields":[{"name":"orderId","type":"string"},{"name":"total","type":"long"},{"name":"currency","type":"string","default":"GBP"},{"name":"channel","type":"string"}]}`,
			`field "channel" is new and has no default, so data written with version 2`},
		{`{"type":"record","name":"Order","fields":[{"name":"orderId","type":"int"},{"name":"total","type":"long"},{"name":"currency","type":"string","default":"GBP"}]}`,
			`field "orderId" changes from string to int`},
	} {
		_, err := avro.Registered(ctx, reg, "orders", tc.schema)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), `acemq: cannot register a new version of subject "orders": `) {
			t.Errorf("Registered = %v; want a refusal containing %q", err, tc.want)
		}
	}
	if vs, _ := reg.Versions(ctx, "orders"); len(vs) != 2 {
		t.Fatalf("%d versions registered; the refused ones must not be", len(vs))
	}
	// A service still on version 1 restarts after version 2 (which v1
	// could not read: total became a long) was registered: it keeps id 1.
	old, err := avro.Registered(ctx, reg, "orders", v1)
	if err != nil {
		t.Fatalf("re-registering version 1 after version 2 = %v", err)
	}
	if b, _ := old.Encode(map[string]any{"orderId": "o", "total": 1}); b[4] != 1 {
		t.Fatalf("version 1 writes with id % x, want 1", b[1:5])
	}
	// The same check, enforced by the registry for every caller.
	strict := schemas.NewMemory(schemas.WithChecker(avro.Format, avro.Backward))
	if _, err := strict.Register(ctx, "orders", avro.Format, v1); err != nil {
		t.Fatal(err)
	}
	if _, err := strict.Register(ctx, "orders", avro.Format, `{"type":"record","name":"Order","fields":[{"name":"orderId","type":"string"},{"name":"total","type":"int"},{"name":"x","type":"int"}]}`); err == nil || !strings.Contains(err.Error(), `field "x" is new and has no default`) {
		t.Fatalf("registry-enforced Backward = %v", err)
	}
	_ = c2
}

// failing is a registry that can be switched off, standing for a registry
// server that is down.
type failing struct {
	schemas.Registry
	down bool
}

var errDown = errors.New("connection refused")

func (f *failing) ByID(ctx context.Context, id uint32) (schemas.Schema, error) {
	if f.down {
		return schemas.Schema{}, errDown
	}
	return f.Registry.ByID(ctx, id)
}

func TestIDsAlreadySeenSurviveARegistryOutageAndUnknownOnesAreRetryable(t *testing.T) {
	ctx := context.Background()
	mem := schemas.NewMemory()
	w1, err := avro.Registered(ctx, mem, "a", `{"type":"record","name":"A","fields":[{"name":"a","type":"string"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := avro.Registered(ctx, mem, "b", `{"type":"record","name":"B","fields":[{"name":"b","type":"string"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	reg := &failing{Registry: mem}
	r, err := avro.RegistryReader(reg)
	if err != nil {
		t.Fatal(err)
	}
	one, _ := w1.Encode(map[string]any{"a": "x"})
	two, _ := w2.Encode(map[string]any{"b": "y"})
	var m map[string]any
	if err := r.Decode(avro.ContentTypeRegistry, one, &m); err != nil {
		t.Fatal(err)
	}
	reg.down = true
	if err := r.Decode(avro.ContentTypeRegistry, one, &m); err != nil || m["a"] != "x" {
		t.Fatalf("a cached id failed while the registry was down: %v", err)
	}
	err = r.Decode(avro.ContentTypeRegistry, two, &m)
	if err == nil || !acemq.IsRetryable(err) || !errors.Is(err, errDown) {
		t.Fatalf("an unseen id with the registry down = %v; want retryable", err)
	}
	out := codectest.Deliver(t, r, avro.ContentTypeRegistry, two)
	if out.Settlement.Outcome != acemq.ConsumeRetried {
		t.Fatalf("through a consumer: %+v; want retried", out.Settlement)
	}
	reg.down = false
	unknown := append([]byte{0, 0, 0, 0x30, 0x39}, one[5:]...) // id 12345
	err = r.Decode(avro.ContentTypeRegistry, unknown, &m)
	if err == nil || acemq.IsRetryable(err) || !acemq.IsFatal(err) || !strings.Contains(err.Error(), "schema id 12345 is not in the registry") {
		t.Fatalf("an unknown id with the registry up = %v; want fatal", err)
	}
	codectest.Parked(t, r, avro.ContentTypeRegistry, unknown, "avro-registry codec", `"application/vnd.acemq.avro"`, "schema id 12345")
}

func TestBadBodiesAreRefusedWithoutAllocatingWithoutBound(t *testing.T) {
	c, err := avro.New(`{"type":"record","name":"R","fields":[{"name":"s","type":"string"},{"name":"nulls","type":{"type":"array","items":"null"}},{"name":"m","type":{"type":"map","values":"null"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		body []byte
		want string
	}{
		"string longer than the body": {[]byte{0xfe, 0xff, 0xff, 0xff, 0x0f, 'a'}, "claims 2147483647 bytes but only 1 remain"},
		"a billion nulls":             {[]byte{0x00, 0x80, 0xa8, 0xd6, 0xb9, 0x07, 0x00, 0x00}, "more than 1048576 array and map items"},
		"truncated":                   {[]byte{0x06, 'a'}, "claims 3 bytes but only 1 remain"},
		"empty":                       {nil, "truncated"},
	} {
		t.Run(name, func(t *testing.T) {
			var v any
			err := c.Decode(avro.ContentTypeBinary, tc.body, &v)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), `acemq: the avro codec cannot decode a body with content type "avro/binary"`) {
				t.Fatalf("Decode = %v; want %q", err, tc.want)
			}
			allocs := testing.AllocsPerRun(3, func() { _ = c.Decode(avro.ContentTypeBinary, tc.body, &v) })
			if allocs > 40 {
				t.Fatalf("refusing a %d-byte body allocated %v times", len(tc.body), allocs)
			}
		})
	}
	codectest.Parked(t, c, "avro/binary", []byte{0x06, 'a'}, "the avro codec", `"avro/binary"`, "claims 3 bytes")
}

func TestATruncatedRegistryFrameIsParked(t *testing.T) {
	r, _ := avro.RegistryReader(schemas.NewMemory())
	codectest.Parked(t, r, avro.ContentTypeRegistry, []byte{0, 0, 0}, "avro-registry codec", `"application/vnd.acemq.avro"`, "registry framing")
}

func TestWorksThroughComposite(t *testing.T) {
	ctx := context.Background()
	reg := schemas.NewMemory()
	writer, err := avro.Registered(ctx, reg, "orders", codectest.OrderAvroSchema)
	if err != nil {
		t.Fatal(err)
	}
	fixed, _ := avro.New(codectest.OrderAvroSchema)
	c := acemq.Composite(writer, fixed, acemq.JSON())
	in := codectest.SampleOrder()
	framedBody, _ := c.Encode(in)
	bareBody, _ := fixed.Encode(in)
	for ct, body := range map[string][]byte{avro.ContentTypeRegistry: framedBody, avro.ContentTypeBinary: bareBody} {
		var out codectest.Order
		if err := c.Decode(ct, body, &out); err != nil || !reflect.DeepEqual(out, in) {
			t.Fatalf("%s: %v", ct, err)
		}
	}
}

func FuzzDecodeBare(f *testing.F) {
	c, err := avro.New(codectest.OrderAvroSchema)
	if err != nil {
		f.Fatal(err)
	}
	b, _ := c.Encode(codectest.SampleOrder())
	for _, s := range [][]byte{b, {}, {0}, {0xfe, 0xff, 0xff, 0xff, 0x0f}, b[:len(b)/2]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var o codectest.Order
		_ = c.Decode(avro.ContentTypeBinary, body, &o)
		var m any
		_ = c.Decode(avro.ContentTypeBinary, body, &m)
	})
}

func FuzzDecodeRegistryFramed(f *testing.F) {
	ctx := context.Background()
	reg := schemas.NewMemory()
	c, err := avro.Registered(ctx, reg, "orders", codectest.OrderAvroSchema)
	if err != nil {
		f.Fatal(err)
	}
	b, _ := c.Encode(codectest.SampleOrder())
	for _, s := range [][]byte{b, {}, {0, 0, 0, 0, 1}, {0, 0, 0, 0, 2, 0}, {0, 0xff, 0xff, 0xff, 0xff}, b[:7]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var m any
		_ = c.Decode(avro.ContentTypeRegistry, body, &m)
		var o codectest.Order
		_ = c.Decode("", body, &o)
	})
}

func BenchmarkEncode(b *testing.B) {
	c, _ := avro.New(codectest.OrderAvroSchema)
	o := codectest.SampleOrder()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Encode(o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	c, _ := avro.New(codectest.OrderAvroSchema)
	body, _ := c.Encode(codectest.SampleOrder())
	b.ReportAllocs()
	for b.Loop() {
		var o codectest.Order
		if err := c.Decode(avro.ContentTypeBinary, body, &o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeRegistryFramedCached(b *testing.B) {
	c, _ := avro.Registered(context.Background(), schemas.NewMemory(), "orders", codectest.OrderAvroSchema)
	body, _ := c.Encode(codectest.SampleOrder())
	b.ReportAllocs()
	for b.Loop() {
		var o codectest.Order
		if err := c.Decode(avro.ContentTypeRegistry, body, &o); err != nil {
			b.Fatal(err)
		}
	}
}

// TestARegistryOnEachDatabaseServesTheCodecAndItsOutageIsRetryable runs
// the registry-framed codec over the SQL registry on SQLite, PostgreSQL and
// MariaDB: a writer and a reader in different "processes" (stores) share
// ids through the table; once the database is closed, ids the reader has
// seen still decode and an unseen one is retryable.
func TestARegistryOnEachDatabaseServesTheCodecAndItsOutageIsRetryable(t *testing.T) {
	ctx := context.Background()
	for _, b := range dbtest.Dialects {
		t.Run(b.Name, func(t *testing.T) {
			db, d := b.Open(t)
			writerStore, err := schemas.NewSQL(ctx, db, d)
			if err != nil {
				t.Fatal(err)
			}
			w1, err := avro.Registered(ctx, writerStore, "orders", codectest.OrderAvroSchema)
			if err != nil {
				t.Fatal(err)
			}
			w2, err := avro.Registered(ctx, writerStore, "notes", `{"type":"record","name":"Note","fields":[{"name":"text","type":"string"}]}`)
			if err != nil {
				t.Fatal(err)
			}
			readerStore, err := schemas.NewSQL(ctx, db, d)
			if err != nil {
				t.Fatal(err)
			}
			r, err := avro.RegistryReader(readerStore)
			if err != nil {
				t.Fatal(err)
			}
			in := codectest.SampleOrder()
			one, _ := w1.Encode(in)
			two, _ := w2.Encode(map[string]any{"text": "hi"})
			var out codectest.Order
			if err := r.Decode(avro.ContentTypeRegistry, one, &out); err != nil || !reflect.DeepEqual(out, in) {
				t.Fatalf("decode through the %s registry: %v", b.Name, err)
			}
			db.Close()
			out = codectest.Order{}
			if err := r.Decode(avro.ContentTypeRegistry, one, &out); err != nil || out.ID != in.ID {
				t.Fatalf("a cached id with the database closed: %v", err)
			}
			var m map[string]any
			if err := r.Decode(avro.ContentTypeRegistry, two, &m); err == nil || !acemq.IsRetryable(err) {
				t.Fatalf("an unseen id with the database closed = %v; want retryable", err)
			}
		})
	}
}
