package schemas_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/acemq-go/acemq/codec/schemas"
	"github.com/acemq-go/acemq/codec/schemas/internal/dbtest"
)

// store is what the conformance suite drives: a Registry that can import.
type store interface {
	schemas.Registry
	Import(ctx context.Context, s schemas.Schema) error
}

// refuseBreaking is a checker that refuses any definition containing "breaking".
func refuseBreaking(prev schemas.Schema, next string) error {
	if strings.Contains(next, "breaking") {
		return fmt.Errorf("field %q cannot be read from version %d", "breaking", prev.Version)
	}
	return nil
}

type backend struct {
	name string
	open func(t *testing.T) store
}

func backends() []backend {
	out := []backend{{"memory", func(*testing.T) store {
		return schemas.NewMemory(schemas.WithChecker("avro", refuseBreaking))
	}}}
	for _, b := range dbtest.Dialects {
		out = append(out, backend{"sql-" + b.Name, func(t *testing.T) store {
			db, d := b.Open(t)
			s, err := schemas.NewSQL(context.Background(), db, d, schemas.WithChecker("avro", refuseBreaking))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}})
	}
	return out
}

func TestRegistryConformance(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			r := b.open(t)
			v1, err := r.Register(ctx, "orders", "avro", `{"type":"string"}`)
			if err != nil {
				t.Fatal(err)
			}
			if v1.ID == 0 || v1.Version != 1 || v1.Fingerprint != schemas.Fingerprint(`{"type":"string"}`) {
				t.Fatalf("first registration %+v", v1)
			}
			if again, err := r.Register(ctx, "orders", "avro", `{"type":"string"}`); err != nil || again.ID != v1.ID || again.Version != 1 {
				t.Fatalf("re-registering the same bytes gave %+v, %v; want id %d version 1", again, err, v1.ID)
			}
			v2, err := r.Register(ctx, "orders", "avro", `{"type": "string"}`) // other bytes, same meaning: a new version
			if err != nil || v2.ID == v1.ID || v2.Version != 2 {
				t.Fatalf("second definition %+v, %v", v2, err)
			}
			other, err := r.Register(ctx, "payments", "avro", `{"type":"string"}`)
			if err != nil || other.ID == v1.ID || other.ID == v2.ID || other.Version != 1 {
				t.Fatalf("same bytes under another subject %+v, %v", other, err)
			}
			_, err = r.Register(ctx, "orders", "avro", `{"breaking":true}`)
			if err == nil || !strings.Contains(err.Error(), `cannot register a new version of subject "orders": field "breaking" cannot be read from version 2`) {
				t.Fatalf("the checker's refusal = %v", err)
			}
			if _, err := r.Register(ctx, "orders", "protobuf", `message X {}`); err == nil || !strings.Contains(err.Error(), "holds avro schemas") {
				t.Fatalf("a second format in a subject = %v", err)
			}
			if latest, err := r.Latest(ctx, "orders"); err != nil || latest.ID != v2.ID {
				t.Fatalf("Latest = %+v, %v", latest, err)
			}
			vs, err := r.Versions(ctx, "orders")
			if err != nil || len(vs) != 2 || vs[0].ID != v1.ID || vs[1].ID != v2.ID {
				t.Fatalf("Versions = %+v, %v", vs, err)
			}
			got, err := r.ByID(ctx, v2.ID)
			if err != nil || got.Definition != `{"type": "string"}` || got.Subject != "orders" || got.Format != "avro" ||
				!got.RegisteredAt.Equal(v2.RegisteredAt) {
				t.Fatalf("ByID = %+v, %v; registered %+v", got, err, v2)
			}
			if _, err := r.ByID(ctx, 9999); !errors.Is(err, schemas.ErrNotFound) {
				t.Fatalf("ByID(unknown) = %v", err)
			}
			if _, err := r.Latest(ctx, "nothing"); !errors.Is(err, schemas.ErrNotFound) {
				t.Fatalf("Latest(unknown) = %v", err)
			}
			if vs, err := r.Versions(ctx, "nothing"); err != nil || len(vs) != 0 {
				t.Fatalf("Versions(unknown) = %v, %v", vs, err)
			}
			if _, err := r.Register(ctx, "", "avro", "x"); err == nil {
				t.Fatal("an empty subject was accepted")
			}

			// Any text round-trips, and subjects differing only in case are two subjects.
			uni, err := r.Register(ctx, "Bestellungen-ü", "avro", `{"type":"string","doc":"Größe 😀"}`)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := r.ByID(ctx, uni.ID); err != nil || got.Definition != `{"type":"string","doc":"Größe 😀"}` || got.Subject != "Bestellungen-ü" {
				t.Fatalf("non-ASCII text came back as %+v, %v", got, err)
			}
			if lower, err := r.Register(ctx, "bestellungen-ü", "avro", `{"type":"string","doc":"Größe 😀"}`); err != nil || lower.ID == uni.ID || lower.Version != 1 {
				t.Fatalf("a subject differing in case = %+v, %v; want a subject of its own", lower, err)
			}

			// Import keeps another registry's id; later ids never reuse it.
			imported := schemas.Schema{ID: 101, Subject: "java.orders", Version: 1, Format: "avro", Definition: `{"type":"int"}`}
			if err := r.Import(ctx, imported); err != nil {
				t.Fatal(err)
			}
			if err := r.Import(ctx, imported); err != nil {
				t.Fatalf("importing the same schema twice: %v", err)
			}
			if err := r.Import(ctx, schemas.Schema{ID: 101, Subject: "x", Version: 1, Format: "avro", Definition: "y"}); err == nil {
				t.Fatal("a different schema was imported over id 101")
			}
			if got, err := r.ByID(ctx, 101); err != nil || got.Definition != `{"type":"int"}` {
				t.Fatalf("ByID(101) = %+v, %v", got, err)
			}
			next, err := r.Register(ctx, "later", "avro", `{"type":"long"}`)
			if err != nil || next.ID <= 101 {
				t.Fatalf("a registration after importing id 101 got %+v, %v", next, err)
			}
		})
	}
}

func TestConcurrentRegistrationsGetOneIDPerDefinition(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			r := b.open(t)
			const n = 6
			ids := make([]uint32, 2*n)
			errs := make([]error, 2*n)
			var wg sync.WaitGroup
			for i := range 2 * n {
				wg.Go(func() {
					def := `{"type":"string"}` // half register the same bytes
					if i%2 == 1 {
						def = fmt.Sprintf(`{"type":"string","doc":"%d"}`, i)
					}
					s, err := r.Register(ctx, "orders", "avro", def)
					ids[i], errs[i] = s.ID, err
				})
			}
			wg.Wait()
			seen := map[uint32]bool{}
			for i := range 2 * n {
				if errs[i] != nil {
					t.Fatalf("registration %d: %v", i, errs[i])
				}
				if i%2 == 0 && ids[i] != ids[0] {
					t.Fatalf("the same definition got ids %d and %d", ids[0], ids[i])
				}
				seen[ids[i]] = true
			}
			vs, err := r.Versions(ctx, "orders")
			if err != nil || len(vs) != n+1 || len(seen) != n+1 {
				t.Fatalf("%d versions, %d distinct ids (want %d): %v", len(vs), len(seen), n+1, err)
			}
			for i, v := range vs {
				if v.Version != i+1 {
					t.Fatalf("versions are not 1..%d: %+v", n+1, vs)
				}
			}
		})
	}
}

func TestIDsSurviveAReopenOfTheSQLStore(t *testing.T) {
	ctx := context.Background()
	for _, b := range dbtest.Dialects {
		t.Run(b.Name, func(t *testing.T) {
			db, d := b.Open(t)
			first, err := schemas.NewSQL(ctx, db, d)
			if err != nil {
				t.Fatal(err)
			}
			s, err := first.Register(ctx, "orders", "avro", `"string"`)
			if err != nil {
				t.Fatal(err)
			}
			second, err := schemas.NewSQL(ctx, db, d)
			if err != nil {
				t.Fatal(err)
			}
			again, err := second.Register(ctx, "orders", "avro", `"string"`)
			if err != nil || again.ID != s.ID {
				t.Fatalf("after reopening: %+v, %v; want id %d", again, err, s.ID)
			}
		})
	}
}

func TestALookupOnAClosedDatabaseIsNotNotFound(t *testing.T) {
	db, d := dbtest.SQLite(t)
	r, err := schemas.NewSQL(context.Background(), db, d)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = r.ByID(context.Background(), 1)
	if err == nil || errors.Is(err, schemas.ErrNotFound) || !errors.Is(err, sql.ErrConnDone) && !strings.Contains(err.Error(), "closed") {
		t.Fatalf("ByID on a closed database = %v; want a database error, not ErrNotFound", err)
	}
}

func TestFingerprintIsTheSHA256OfTheExactBytes(t *testing.T) {
	// sha256("abc"), the FIPS 180-2 test vector.
	if got := schemas.Fingerprint("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("Fingerprint(abc) = %s", got)
	}
}
