package avro

import (
	"fmt"
	"strings"

	hamba "github.com/hamba/avro/v2"

	"github.com/acemq-go/acemq/codec/schemas"
)

// Backward is the Avro compatibility check (a schemas.Checker): next may
// follow previous when a reader holding next can read data written with
// previous. A refusal names the field: one next declares without a
// default that previous does not write, or one whose type cannot be read
// from the type previous wrote. Pass it to schemas.WithChecker("avro",
// avro.Backward) to have a registry enforce it on every registration;
// Registered checks it whatever the registry does.
func Backward(previous schemas.Schema, next string) error {
	old, err := parse(previous.Definition)
	if err != nil {
		return fmt.Errorf("the registered version %d (id %d) does not parse as Avro: %w", previous.Version, previous.ID, err)
	}
	nw, err := parse(next)
	if err != nil {
		return fmt.Errorf("the new schema does not parse as Avro: %w", err)
	}
	if err := fieldDiff(nw, old, previous); err != nil {
		return err
	}
	if err := hamba.NewSchemaCompatibility().Compatible(nw, old); err != nil {
		return fmt.Errorf("it cannot read data written with version %d (id %d): %v", previous.Version, previous.ID, err)
	}
	return nil
}

// fieldDiff names the first top-level record field that stops the new
// schema from reading the old data.
func fieldDiff(reader, writer hamba.Schema, previous schemas.Schema) error {
	rr, ok1 := reader.(*hamba.RecordSchema)
	wr, ok2 := writer.(*hamba.RecordSchema)
	if !ok1 || !ok2 {
		return nil
	}
	written := map[string]*hamba.Field{}
	for _, f := range wr.Fields() {
		written[f.Name()] = f
	}
	for _, f := range rr.Fields() {
		w, ok := written[f.Name()]
		for _, alias := range f.Aliases() {
			if !ok {
				w, ok = written[alias]
			}
		}
		if !ok {
			if !f.HasDefault() {
				return fmt.Errorf("field %q is new and has no default, so data written with version %d (id %d) cannot be read; give %q a default", f.Name(), previous.Version, previous.ID, f.Name())
			}
			continue
		}
		if err := hamba.NewSchemaCompatibility().Compatible(f.Type(), w.Type()); err != nil {
			return fmt.Errorf("field %q changes from %s to %s, which cannot read data written with version %d (id %d): %v", f.Name(), typeName(w.Type()), typeName(f.Type()), previous.Version, previous.ID, err)
		}
	}
	return nil
}

func typeName(s hamba.Schema) string {
	if n, ok := s.(hamba.NamedSchema); ok {
		return n.FullName()
	}
	return strings.ToLower(string(s.Type()))
}

// parse parses a schema with a cache of its own, so named types of one
// schema never leak into another's (two versions of one record share a
// name).
func parse(schema string) (hamba.Schema, error) {
	return hamba.ParseWithCache(schema, "", &hamba.SchemaCache{})
}
