// Package schemas is the AceMQ schema registry (behaviour §7.13): subjects
// with versions 1, 2, …, each definition under a global id that never
// changes, found again by id, as the latest of its subject, or as all of
// its versions.
//
// Two stores keep the same promises: Memory (one process, for tests and
// single-service use) and SQL (a table on PostgreSQL, SQLite or MySQL
// through database/sql, shared by every service and every AceMQ library
// reading the same database).
//
// Registering the exact bytes of a definition already in a subject
// returns the id it already has (the fingerprint is the SHA-256 of those
// bytes, so re-rendered JSON is a new definition). A new definition in a
// subject is checked against the subject's latest version by the Checker
// configured for its format (WithChecker); the Avro codec checks backward
// compatibility itself before it registers, so a change that cannot read
// the data already written is refused with a sentence naming the field.
//
// The manual's page on codecs and the schema registry: https://github.com/acemq-go/acemq/blob/main/docs/codecs.md
package schemas

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// ErrNotFound is returned (wrapped) for an id or subject the registry does
// not hold. It is the only error meaning "not there": any other error from
// a lookup means the registry could not be asked, and may succeed later.
var ErrNotFound = errors.New("acemq: no such schema in the registry")

// Schema is one registered definition.
type Schema struct {
	// ID is global and stable for ever; it is the number the Avro registry
	// framing carries (contract §2.5).
	ID uint32
	// Subject and Version place it: versions count from 1 per subject.
	Subject string
	Version int
	// Format names the schema language ("avro").
	Format string
	// Definition is the exact text registered.
	Definition string
	// Fingerprint is the lower-case hex SHA-256 of Definition's bytes.
	Fingerprint  string
	RegisteredAt time.Time
}

// Registry is what codecs read schemas through. Memory and SQL implement
// it; so can a client of another registry. Implementations are safe for
// concurrent use. Errors other than ErrNotFound mean the registry could
// not answer (it is down or slow), not that the schema is absent.
type Registry interface {
	// Register records definition under subject and returns it with its
	// id and version, or the existing one when the subject already holds
	// these exact bytes. It fails when the format's Checker refuses the
	// definition against the subject's latest version.
	Register(ctx context.Context, subject, format, definition string) (Schema, error)
	// ByID returns the schema with this id, or an error wrapping ErrNotFound.
	ByID(ctx context.Context, id uint32) (Schema, error)
	// Latest returns the subject's highest version, or ErrNotFound.
	Latest(ctx context.Context, subject string) (Schema, error)
	// Versions returns every version of the subject, oldest first (empty,
	// with no error, for an unknown subject).
	Versions(ctx context.Context, subject string) ([]Schema, error)
}

// Checker decides whether next may follow previous in a subject. It
// returns nil to allow it, or an error whose text says why not (naming the
// field) to refuse it.
type Checker func(previous Schema, next string) error

// Option configures a store.
type Option func(*config)

type config struct {
	checkers map[string]Checker
	now      func() time.Time
}

// WithChecker sets the compatibility check for definitions of format
// (such as avro.Backward for "avro"). Without one, any new definition in a
// subject is accepted as its next version.
func WithChecker(format string, c Checker) Option {
	return func(cfg *config) { cfg.checkers[format] = c }
}

func newConfig(opts []Option) config {
	cfg := config{checkers: map[string]Checker{}, now: time.Now}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return cfg
}

// Fingerprint returns the lower-case hex SHA-256 of definition's bytes.
func Fingerprint(definition string) string {
	sum := sha256.Sum256([]byte(definition))
	return hex.EncodeToString(sum[:])
}

// check validates a registration request and runs the format's checker
// against the subject's latest version (nil when it has none).
func (cfg config) check(subject, format, definition string, latest *Schema) error {
	if subject == "" || len(subject) > 255 {
		return fmt.Errorf("acemq: cannot register a schema under subject %q: a subject is 1 to 255 bytes", subject)
	}
	if format == "" || len(format) > 32 {
		return fmt.Errorf("acemq: cannot register a schema with format %q: a format is 1 to 32 bytes, such as \"avro\"", format)
	}
	if definition == "" {
		return fmt.Errorf("acemq: cannot register an empty schema under subject %q", subject)
	}
	if latest == nil {
		return nil
	}
	if latest.Format != format {
		return fmt.Errorf("acemq: cannot register a %s schema under subject %q, which holds %s schemas; use another subject", format, subject, latest.Format)
	}
	if c := cfg.checkers[format]; c != nil {
		if err := c(*latest, definition); err != nil {
			return fmt.Errorf("acemq: cannot register a new version of subject %q: %w", subject, err)
		}
	}
	return nil
}

func notFoundID(id uint32) error {
	return fmt.Errorf("%w: no schema has id %d", ErrNotFound, id)
}

func notFoundSubject(subject string) error {
	return fmt.Errorf("%w: subject %q has no versions", ErrNotFound, subject)
}
