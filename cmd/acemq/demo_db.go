package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx" for --db postgres://
	_ "modernc.org/sqlite"             // registers "sqlite": the demo's default, nothing to install

	"github.com/acemq-go/acemq"
)

// demoDB is the demo's database: SQLite in a temporary file by default,
// PostgreSQL with --db postgres://…. On PostgreSQL the run's tables live
// in a schema of their own (acemq_demo_{run}, first on the search path),
// so runs against a shared server never meet, and it is dropped at the end.
type demoDB struct {
	*sql.DB
	kind   string // "sqlite" or "postgresql"
	schema string
	admin  *sql.DB // PostgreSQL: the connection that owns the schema
	where  string
	tmpDir string
}

func openDemoDB(ctx context.Context, dsn, run string) (*demoDB, error) {
	d := &demoDB{}
	var err error
	switch {
	case strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://"):
		d.kind, d.schema = "postgresql", "acemq_demo_"+run
		d.where = redact(dsn) + ", schema " + d.schema
		if d.admin, err = sql.Open("pgx", dsn); err == nil {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = d.admin.ExecContext(pctx, "CREATE SCHEMA "+d.schema)
			cancel()
		}
		if err == nil {
			d.DB, err = sql.Open("pgx", withSearchPath(dsn, d.schema))
		}
	default:
		d.kind = "sqlite"
		path := dsn
		if path == "" {
			if d.tmpDir, err = os.MkdirTemp("", "acemq-demo-"); err != nil {
				return nil, fmt.Errorf("cannot create a temporary directory for the demo's SQLite database (%v); set TMPDIR to a writable directory", err)
			}
			path = filepath.Join(d.tmpDir, "demo.db")
			d.where = "a temporary file"
		} else {
			d.where = path
		}
		d.DB, err = sql.Open("sqlite", path)
		// One connection: SQLite has one writer, and the handlers'
		// transactions then queue instead of failing with SQLITE_BUSY.
		if err == nil {
			d.SetMaxOpenConns(1)
		}
	}
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = d.PingContext(pctx)
		cancel()
	}
	if err != nil {
		d.close()
		return nil, fmt.Errorf("cannot open the database %s (%v); check --db, or leave it out to use SQLite", redact(dsn), err)
	}
	blob := "BLOB"
	if d.kind == "postgresql" {
		blob = "BYTEA"
	}
	for _, stmt := range []string{
		`CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY, sku VARCHAR(64) NOT NULL, cents INTEGER NOT NULL, created_at BIGINT NOT NULL)`,
		// The outbox table of behaviour §7.1 (without the relay-lock columns
		// a single relay does not need).
		`CREATE TABLE outbox (seq BIGINT NOT NULL UNIQUE, id VARCHAR(64) PRIMARY KEY, exchange_name VARCHAR(255) NOT NULL,
			routing_key VARCHAR(255) NOT NULL, content_type VARCHAR(255) NOT NULL, headers TEXT NOT NULL, body ` + blob + ` NOT NULL,
			created_at BIGINT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, last_error VARCHAR(1000))`,
		`CREATE TABLE processed (consumer VARCHAR(64) NOT NULL, message_id VARCHAR(255) NOT NULL, recorded_at BIGINT NOT NULL, PRIMARY KEY (consumer, message_id))`,
		`CREATE TABLE payments (order_id VARCHAR(64) PRIMARY KEY, cents INTEGER NOT NULL)`,
		`CREATE TABLE reservations (order_id VARCHAR(64) PRIMARY KEY, sku VARCHAR(64) NOT NULL)`,
	} {
		if _, err := d.ExecContext(ctx, stmt); err != nil {
			d.close()
			return nil, fmt.Errorf("cannot create the demo's tables in %s (%v); check that the user may create tables", d.where, err)
		}
	}
	return d, nil
}

// t names one of the run's tables.
func (d *demoDB) t(name string) string { return name }

// withSearchPath adds search_path=schema to a PostgreSQL URL (pgx passes
// unknown parameters to the server as run-time settings).
func withSearchPath(dsn, schema string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "search_path=" + schema
}

// close drops the run's schema (PostgreSQL) or the temporary file (SQLite).
func (d *demoDB) close() {
	if d.DB != nil {
		_ = d.DB.Close()
	}
	if d.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _ = d.admin.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+d.schema+" CASCADE")
		cancel()
		_ = d.admin.Close()
	}
	if d.tmpDir != "" {
		_ = os.RemoveAll(d.tmpDir)
	}
}

// outboxRecord is one committed, not yet relayed message.
type outboxRecord struct {
	Seq         int64
	ID          string
	Exchange    string
	RoutingKey  string
	ContentType string
	Headers     map[string]any
	Body        []byte
}

// addToOutbox records msg in the caller's transaction: it commits or rolls
// back with the business row (behaviour §7.1). It never begins or ends
// the transaction.
func (d *demoDB) addToOutbox(ctx context.Context, tx *sql.Tx, seq int64, env acemq.Envelope, exchange, key string, body []byte) error {
	h, err := json.Marshal(env.WireHeaders())
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (seq, id, exchange_name, routing_key, content_type, headers, body, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, d.t("outbox")), seq, env.ID, exchange, key, "application/json", string(h), body, time.Now().UnixMilli())
	return err
}

// pending reads the outbox in sequence order.
func (d *demoDB) pending(ctx context.Context) ([]outboxRecord, error) {
	rows, err := d.QueryContext(ctx, fmt.Sprintf(`SELECT seq, id, exchange_name, routing_key, content_type, headers, body FROM %s ORDER BY seq LIMIT 100`, d.t("outbox")))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []outboxRecord
	for rows.Next() {
		var r outboxRecord
		var h string
		if err := rows.Scan(&r.Seq, &r.ID, &r.Exchange, &r.RoutingKey, &r.ContentType, &h, &r.Body); err != nil {
			return nil, err
		}
		if r.Headers, err = decodeHeaders(h); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// decodeHeaders reads stored wire headers, keeping whole numbers integers
// (JSON would otherwise turn the attempt header into a float).
func decodeHeaders(s string) (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var h map[string]any
	if err := dec.Decode(&h); err != nil {
		return nil, err
	}
	for k, v := range h {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				h[k] = i
			} else if f, err := n.Float64(); err == nil {
				h[k] = f
			}
		}
	}
	return h, nil
}

func (d *demoDB) deleteRecord(ctx context.Context, id string) error {
	_, err := d.ExecContext(ctx, fmt.Sprintf(`DELETE FROM %s WHERE id = $1`, d.t("outbox")), id)
	return err
}

// once runs effect inside a transaction that also records (consumer,
// message id) as processed: the stronger idempotency variant of behaviour
// §7.2. A message id already recorded is a duplicate: effect does not run
// and once returns duplicate = true. An effect error rolls both back, so a
// retry or a replay runs it again.
func (d *demoDB) once(ctx context.Context, consumer, messageID string, effect func(tx *sql.Tx) error) (duplicate bool, err error) {
	tx, err := d.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (consumer, message_id, recorded_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, d.t("processed")),
		consumer, messageID, time.Now().UnixMilli())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("the database cannot report rows affected, which the idempotency guard depends on: %w", err)
	}
	if n == 0 {
		return true, nil
	}
	if err := effect(tx); err != nil {
		return false, err
	}
	return false, tx.Commit()
}

func (d *demoDB) count(ctx context.Context, table string) (int, error) {
	var n int
	err := d.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+d.t(table)).Scan(&n)
	return n, err
}
