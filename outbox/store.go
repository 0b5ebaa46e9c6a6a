package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/outbox/internal/mysqltable"
	"github.com/acemq-go/acemq/sqlstore"
)

// Table is the outbox table's name.
const Table = "acemq_outbox"

// NotifyChannel is the PostgreSQL LISTEN/NOTIFY channel Add notifies and
// relays listen on.
const NotifyChannel = "acemq_outbox"

// MaxAttempts is the number of record-specific failures after which a
// record is retired.
const MaxAttempts = 10

// ErrNotRetired is returned by Release for an id that is not a retired
// record (unknown, already published, or not yet retired).
var ErrNotRetired = errors.New("acemq: no retired outbox record has that id")

// ErrNotPending is returned by Retire for an id that is not a pending
// record (unknown, already published, or retired already).
var ErrNotPending = errors.New("acemq: no pending outbox record has that id")

// Store is the outbox table in one database. It is safe for concurrent
// use; every method waits on ctx.
type Store struct {
	db      *sql.DB
	dialect sqlstore.Dialect
	// now is this process's clock: created_at and the lag metric.
	now func() time.Time
	// leaseNow, when set, is the time relays' leases are written and
	// compared at (tests); nil: the database's clock, the one clock all
	// relays share.
	leaseNow func() time.Time
	// notify is how Add notifies on PostgreSQL: notifyInInsert (the
	// default), or, for BenchmarkAddOnPostgres's comparison, notifyApart
	// (the insert, then pg_notify(channel, id): how Add did it) or
	// notifyNone.
	notify notifyMode
}

// notifyMode is how Add notifies relays on PostgreSQL.
type notifyMode int

const (
	notifyInInsert notifyMode = iota
	notifyApart
	notifyNone
)

// StoreOption configures a Store.
type StoreOption func(*Store)

// WithoutNotify makes Add on PostgreSQL notify no relay: for a database
// whose relays poll (no outbox/pgnotify), where the notify costs producers
// throughput for nothing (docs/performance.md: about a tenth with 32
// producers adding one record a transaction). Relays then publish at their
// next poll.
func WithoutNotify() StoreOption { return func(s *Store) { s.notify = notifyNone } }

// NewStore returns the outbox store over db in the given dialect. It does
// not touch the database; call EnsureSchema once at start-up (or create
// the table with the SQL in the package doc).
func NewStore(db *sql.DB, dialect sqlstore.Dialect, opts ...StoreOption) (*Store, error) {
	if db == nil {
		return nil, errors.New("acemq: outbox.NewStore needs a *sql.DB")
	}
	if err := dialect.Validate(); err != nil {
		return nil, err
	}
	s := &Store{db: db, dialect: dialect, now: time.Now}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	return s, nil
}

// DB returns the database the store works on.
func (s *Store) DB() *sql.DB { return s.db }

// Dialect returns the store's SQL dialect.
func (s *Store) Dialect() sqlstore.Dialect { return s.dialect }

func (s *Store) q(query string) string { return s.dialect.Rebind(query) }

// leaseAt is the argument of a lease statement's COALESCE(?, now): nil,
// so the database's clock is read, or the test's lease clock in epoch ms.
func (s *Store) leaseAt() any {
	if s.leaseNow == nil {
		return nil
	}
	return s.leaseNow().UnixMilli()
}

// mysqlSchema is the table on MySQL. Ids and relay names are VARBINARY,
// compared byte for byte: the default collations compare text without
// case and trailing spaces, which made "Order-A" a duplicate of "order-a".
// Text is utf8mb4 whatever the server's default (MariaDB's is latin1), and
// the engine InnoDB whatever the default: MyISAM has no transactions.
// Headers are LONGTEXT: TEXT holds only 64 KiB.
const mysqlSchema = `CREATE TABLE IF NOT EXISTS acemq_outbox (
  seq BIGINT NOT NULL AUTO_INCREMENT UNIQUE,
  id VARBINARY(64) PRIMARY KEY,
  exchange_name VARCHAR(255) NOT NULL,
  routing_key VARCHAR(255) NOT NULL,
  content_type VARCHAR(255) NOT NULL,
  headers LONGTEXT NOT NULL,
  body LONGBLOB NOT NULL,
  created_at BIGINT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error VARCHAR(1000),
  locked_by VARBINARY(64),
  locked_until BIGINT,
  INDEX acemq_outbox_attempts_seq (attempts, seq),
  INDEX acemq_outbox_locked_by (locked_by)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

// mysqlColumns are the column types mysqltable.Check insists on.
var mysqlColumns = []mysqltable.Column{
	{Name: "id", Type: "varbinary", Definition: "VARBINARY(64) NOT NULL", Why: "compared byte for byte, or ids differing in case are taken for one"},
	{Name: "locked_by", Type: "varbinary", Definition: "VARBINARY(64)", Why: "compared byte for byte, or relays named alike share a lock"},
	{Name: "headers", Type: "longtext", Definition: "LONGTEXT NOT NULL", Why: "TEXT holds only 64 KiB of headers"},
}

// Schema returns the statements EnsureSchema runs for the store's dialect.
func (s *Store) Schema() []string {
	cols := `
  id VARCHAR(64) PRIMARY KEY,
  exchange_name VARCHAR(255) NOT NULL,
  routing_key VARCHAR(255) NOT NULL,
  content_type VARCHAR(255) NOT NULL,
  headers TEXT NOT NULL,
  body ` + s.dialect.BlobType() + ` NOT NULL,
  created_at BIGINT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error VARCHAR(1000),
  locked_by VARCHAR(64),
  locked_until BIGINT`
	indexes := []string{
		`CREATE INDEX IF NOT EXISTS acemq_outbox_attempts_seq ON acemq_outbox (attempts, seq)`,
		`CREATE INDEX IF NOT EXISTS acemq_outbox_locked_by ON acemq_outbox (locked_by)`,
	}
	switch s.dialect {
	case sqlstore.PostgreSQL:
		return append([]string{`CREATE TABLE IF NOT EXISTS acemq_outbox (
  seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,` + cols + `)`}, indexes...)
	case sqlstore.MySQL:
		return []string{mysqlSchema}
	}
	return append([]string{`CREATE TABLE IF NOT EXISTS acemq_outbox (
  seq BIGINT NOT NULL UNIQUE,` + cols + `)`}, indexes...)
}

// EnsureSchema creates the outbox table and its indexes if they do not
// exist, and adds to a table made by an earlier version the indexes it
// lacks (acemq_outbox_locked_by, which the claim's queries use). It is
// idempotent and safe to call from several processes. On MySQL it also
// checks a table that was there already, and fails with the
// ALTER TABLE that fixes it when the table is not InnoDB, compares ids
// without case, holds headers in TEXT, or keeps text in another character
// set than utf8mb4.
func (s *Store) EnsureSchema(ctx context.Context) error {
	for _, stmt := range s.Schema() {
		if _, err := s.db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("acemq: cannot create the outbox table: %w", err)
		}
	}
	if s.dialect == sqlstore.MySQL {
		if err := s.addMySQLIndex(ctx, "acemq_outbox_locked_by", "locked_by"); err != nil {
			return err
		}
		return mysqltable.Check(ctx, s.db, Table, mysqlColumns...)
	}
	return nil
}

// addMySQLIndex adds an index a table made by an earlier version lacks
// (MySQL has no CREATE INDEX IF NOT EXISTS). A concurrent EnsureSchema
// that added it first (error 1061, duplicate key name) is success.
func (s *Store) addMySQLIndex(ctx context.Context, name, columns string) error {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME = ?`, Table, name).Scan(&n); err != nil {
		return fmt.Errorf("acemq: cannot read the outbox table's indexes: %w", err)
	}
	if n > 0 {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, `ALTER TABLE acemq_outbox ADD INDEX `+name+` (`+columns+`)`); err != nil && !strings.Contains(err.Error(), "1061") {
		return fmt.Errorf("acemq: cannot add the index %s to the outbox table: %w", name, err)
	}
	return nil
}

// AddOption adjusts the envelope Add builds.
type AddOption func(*addOptions)

type addOptions struct {
	env     *acemq.Envelope
	headers map[string]any
	corr    string
	cause   string
	typ     string
	codec   acemq.Codec
	errs    []error
}

// WithEnvelope stores the message with this envelope (its id decides
// idempotency); empty fields get the usual defaults.
func WithEnvelope(e acemq.Envelope) AddOption { return func(o *addOptions) { o.env = &e } }

// WithHeader sets one application header; reserved x-acemq- names are
// refused by Add.
func WithHeader(name string, value any) AddOption {
	return func(o *addOptions) {
		if o.headers == nil {
			o.headers = map[string]any{}
		}
		if _, err := (acemq.Envelope{}).WithHeader(name, value); err != nil {
			o.errs = append(o.errs, err)
			return
		}
		o.headers[name] = value
	}
}

// WithCorrelationID sets the envelope's correlation id.
func WithCorrelationID(id string) AddOption { return func(o *addOptions) { o.corr = id } }

// WithCausationID sets the envelope's causation id.
func WithCausationID(id string) AddOption { return func(o *addOptions) { o.cause = id } }

// WithType overrides the message type (default: the routing key).
func WithType(t string) AddOption { return func(o *addOptions) { o.typ = t } }

// WithCodec encodes the payload with c instead of the connection's codec.
func WithCodec(c acemq.Codec) AddOption { return func(o *addOptions) { o.codec = c } }

// Add writes one message to the outbox inside tx, the caller's
// transaction: the message is published if and only if tx commits. Add
// never begins, commits or rolls back; a nil tx is an error. It builds the
// envelope (type = routing key unless WithType, the connection's origin),
// encodes payload once with the connection's codec and stores the
// rendered wire headers and the body. Adding an id that is already stored
// changes nothing and is not an error (idempotent by id). On PostgreSQL the
// insert also notifies NotifyChannel (pg_notify, in the same statement),
// delivered at commit, so a relay listening through package pgnotify
// publishes at once; a transaction that adds several records notifies
// once. It returns the envelope stored.
//
// When ctx carries a span, the record stores its trace context
// (traceparent/tracestate, with the Conn's propagator) unless the caller
// set a traceparent with WithHeader: the relay's publish span is then that
// span's child and the consumer continues the caller's trace.
//
// A failure (encoding, an invalid envelope, the insert) leaves nothing
// written by Add; on PostgreSQL a failed statement also aborts tx, as any
// failed statement does, and the caller must roll back. Safe for
// concurrent use on different transactions.
func (s *Store) Add(ctx context.Context, tx *sql.Tx, conn *acemq.Conn, exchange, routingKey string, payload any, opts ...AddOption) (acemq.Envelope, error) {
	if tx == nil {
		return acemq.Envelope{}, errors.New("acemq: outbox.Add needs the caller's transaction (tx is nil); the outbox is written in the same transaction as the work, so begin one and pass it")
	}
	if conn == nil {
		return acemq.Envelope{}, errors.New("acemq: outbox.Add needs the *acemq.Conn whose codec and origin the message carries")
	}
	var o addOptions
	for _, opt := range opts {
		opt(&o)
	}
	if len(o.errs) > 0 {
		return acemq.Envelope{}, errors.Join(o.errs...)
	}
	env := acemq.NewEnvelope()
	if o.env != nil {
		env = *o.env
		def := acemq.NewEnvelope()
		if env.ID == "" {
			env.ID = def.ID
		}
		if env.Version == 0 {
			env.Version = 1
		}
		if env.Attempt == 0 {
			env.Attempt = 1
		}
		if env.FirstSeen.IsZero() {
			env.FirstSeen = def.FirstSeen
		}
	}
	if o.corr != "" {
		env.CorrelationID = o.corr
	}
	if env.CorrelationID == "" {
		env.CorrelationID = env.ID
	}
	if o.cause != "" {
		env.CausationID = o.cause
	}
	if o.typ != "" {
		env.Type = o.typ
	}
	if env.Type == "" {
		env.Type = routingKey
		if env.Type == "" {
			env.Type = "message"
		}
	}
	if env.Origin == "" {
		env.Origin = conn.Config().Origin
	}
	if len(o.headers) > 0 {
		env = env.WithHeaders(o.headers)
	}
	env = withTraceOf(ctx, conn, env)
	if len(env.ID) > 64 {
		return env, fmt.Errorf("acemq: outbox message id %q… is %d bytes, longer than the 64 the outbox id column holds; give the message a shorter id", env.ID[:64], len(env.ID))
	}
	if err := env.Validate(); err != nil {
		return env, fmt.Errorf("acemq: the outbox message envelope is not valid: %w", err)
	}
	codec := o.codec
	if codec == nil {
		codec = conn.Config().Codec
	}
	body, err := codec.Encode(payload)
	if err != nil {
		return env, fmt.Errorf("acemq: cannot encode the outbox message %s with the %s codec: %w", env.ID, codec.Name(), err)
	}
	if body == nil {
		body = []byte{}
	}
	headers, err := encodeHeaders(env.WireHeaders())
	if err != nil {
		return env, fmt.Errorf("acemq: cannot store the headers of outbox message %s: %w", env.ID, err)
	}
	created := s.now().UnixMilli()
	var stmt string
	switch s.dialect {
	case sqlstore.PostgreSQL:
		stmt = `INSERT INTO acemq_outbox (id, exchange_name, routing_key, content_type, headers, body, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`
		if s.notify == notifyInInsert {
			// One round trip, and one notification per transaction
			// however many records it adds: PostgreSQL sends a
			// transaction's identical notifications once.
			stmt = `WITH added AS (` + stmt + ` RETURNING 1) SELECT pg_notify('` + NotifyChannel + `', '') FROM added`
		}
	case sqlstore.MySQL:
		stmt = `INSERT INTO acemq_outbox (id, exchange_name, routing_key, content_type, headers, body, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE id = id`
	default:
		stmt = `INSERT INTO acemq_outbox (seq, id, exchange_name, routing_key, content_type, headers, body, created_at)
SELECT COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ?, ?, ? FROM acemq_outbox WHERE true ON CONFLICT (id) DO NOTHING`
	}
	if _, err := tx.ExecContext(ctx, s.q(stmt), env.ID, exchange, routingKey, codec.ContentType(), headers, body, created); err != nil {
		return env, fmt.Errorf("acemq: cannot add message %s to the outbox: %w", env.ID, err)
	}
	if s.dialect == sqlstore.PostgreSQL && s.notify == notifyApart {
		if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, NotifyChannel, env.ID); err != nil {
			return env, fmt.Errorf("acemq: cannot notify relays of outbox message %s: %w", env.ID, err)
		}
	}
	return env, nil
}

// Record is one stored outbox message.
type Record struct {
	Seq         int64
	ID          string
	Exchange    string
	RoutingKey  string
	ContentType string
	// Headers are the stored wire headers, decoded.
	Headers   map[string]any
	Body      []byte
	CreatedAt time.Time
	Attempts  int
	LastError string
	LockedBy  string
	// LockedUntil is zero when the record is not locked.
	LockedUntil time.Time
}

const recordColumns = `seq, id, exchange_name, routing_key, content_type, headers, body, created_at, attempts, last_error, locked_by, locked_until`

// query runs a SELECT of recordColumns and reads the rows by column name.
func (s *Store) query(ctx context.Context, q querier, query string, args ...any) ([]Record, error) {
	rows, err := q.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	idx, err := sqlstore.Columns(rows, "seq", "id", "exchange_name", "routing_key", "content_type", "headers", "body", "created_at", "attempts", "last_error", "locked_by", "locked_until")
	if err != nil {
		return nil, err
	}
	var out []Record
	for rows.Next() {
		var (
			r                 Record
			headers           string
			created           int64
			lastErr, lockedBy sql.NullString
			lockedUntil       sql.NullInt64
		)
		if err := sqlstore.ScanNamed(rows, idx, map[string]any{
			"seq": &r.Seq, "id": &r.ID, "exchange_name": &r.Exchange, "routing_key": &r.RoutingKey,
			"content_type": &r.ContentType, "headers": &headers, "body": &r.Body, "created_at": &created,
			"attempts": &r.Attempts, "last_error": &lastErr, "locked_by": &lockedBy, "locked_until": &lockedUntil,
		}); err != nil {
			return nil, err
		}
		if err := r.fill(headers, created, lastErr, lockedBy, lockedUntil); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// fill sets the record's fields read from columns that need decoding.
func (r *Record) fill(headers string, created int64, lastErr, lockedBy sql.NullString, lockedUntil sql.NullInt64) error {
	h, err := decodeHeaders(headers)
	if err != nil {
		return fmt.Errorf("acemq: outbox record %s: %w", r.ID, err)
	}
	r.Headers = h
	r.CreatedAt = time.UnixMilli(created)
	r.LastError = lastErr.String
	r.LockedBy = lockedBy.String
	if lockedUntil.Valid {
		r.LockedUntil = time.UnixMilli(lockedUntil.Int64)
	}
	return nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Pending lists the records still to be published (not retired), in
// sequence order, at most limit (≤ 0: all).
func (s *Store) Pending(ctx context.Context, limit int) ([]Record, error) {
	q := `SELECT ` + recordColumns + ` FROM acemq_outbox WHERE attempts < ? ORDER BY seq`
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	recs, err := s.query(ctx, s.db, q, MaxAttempts)
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot list pending outbox records: %w", err)
	}
	return recs, nil
}

// Retired lists the records that failed MaxAttempts times, in sequence
// order. Relays skip them; they stay until Release or a person deletes
// them.
func (s *Store) Retired(ctx context.Context) ([]Record, error) {
	recs, err := s.query(ctx, s.db, `SELECT `+recordColumns+` FROM acemq_outbox WHERE attempts >= ? ORDER BY seq`, MaxAttempts)
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot list retired outbox records: %w", err)
	}
	return recs, nil
}

// Release puts a retired record back in line: attempts reset to 0, its
// last error and lock cleared. It returns ErrNotRetired when id is not a
// retired record.
func (s *Store) Release(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE acemq_outbox SET attempts = 0, last_error = NULL, locked_by = NULL, locked_until = NULL WHERE id = ? AND attempts >= ?`), id, MaxAttempts)
	if err != nil {
		return fmt.Errorf("acemq: cannot release outbox record %s: %w", id, err)
	}
	n, err := sqlstore.RowsAffected(res)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: %s", ErrNotRetired, id)
	}
	return nil
}

// Retire sets a pending record aside by hand, as MaxAttempts failures
// would: relays skip it, Retired lists it and Release puts it back. It is
// for a record an outage holds every relay at that can never go out (its
// exchange is gone for good: see Relay.Held); reason is kept as its last
// error. A relay publishing it at that moment may still get it through. It
// returns ErrNotPending when id is not a pending record.
func (s *Store) Retire(ctx context.Context, id, reason string) error {
	if strings.TrimSpace(reason) == "" {
		reason = "retired by hand"
	}
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE acemq_outbox SET attempts = ?, last_error = ? WHERE id = ? AND attempts < ?`), MaxAttempts, truncate(reason, 1000), id, MaxAttempts)
	if err != nil {
		return fmt.Errorf("acemq: cannot retire outbox record %s: %w", id, err)
	}
	n, err := sqlstore.RowsAffected(res)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: %s", ErrNotPending, id)
	}
	return nil
}
