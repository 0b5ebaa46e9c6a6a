package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx" for --db postgres://
	_ "modernc.org/sqlite"             // registers "sqlite": the demo's default, nothing to install

	"github.com/acemq-go/acemq/cmd/acemq/internal/redact"
	"github.com/acemq-go/acemq/idempotency"
	"github.com/acemq-go/acemq/outbox"
	"github.com/acemq-go/acemq/sqlstore"
)

// demoDB is the demo's database: SQLite in a temporary file by default,
// PostgreSQL with --db postgres://…. On PostgreSQL the run's tables live
// in a schema of their own (acemq_demo_{run}, first on the search path),
// so runs against a shared server never meet, and it is dropped at the end.
type demoDB struct {
	*sql.DB
	kind    string // "sqlite" or "postgresql"
	dialect sqlstore.Dialect
	outbox  *outbox.Store
	schema  string
	admin   *sql.DB // PostgreSQL: the connection that owns the schema
	where   string
	tmpDir  string
}

func openDemoDB(ctx context.Context, dsn, run string) (*demoDB, error) {
	d := &demoDB{}
	var err error
	switch {
	case strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://"):
		d.kind, d.dialect, d.schema = "postgresql", sqlstore.PostgreSQL, "acemq_demo_"+run
		d.where = redact.URL(dsn) + ", schema " + d.schema
		if d.admin, err = sql.Open("pgx", dsn); err == nil {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = d.admin.ExecContext(pctx, "CREATE SCHEMA "+d.schema)
			cancel()
		}
		if err == nil {
			d.DB, err = sql.Open("pgx", withSearchPath(dsn, d.schema))
		}
	default:
		d.kind, d.dialect = "sqlite", sqlstore.SQLite
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
		return nil, fmt.Errorf("cannot open the database %s (%v); check --db, or leave it out to use SQLite", redact.URL(dsn), err)
	}
	for _, stmt := range []string{
		`CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY, sku VARCHAR(64) NOT NULL, cents INTEGER NOT NULL, created_at BIGINT NOT NULL)`,
		`CREATE TABLE payments (order_id VARCHAR(64) PRIMARY KEY, cents INTEGER NOT NULL)`,
		`CREATE TABLE reservations (order_id VARCHAR(64) PRIMARY KEY, sku VARCHAR(64) NOT NULL)`,
	} {
		if _, err := d.ExecContext(ctx, stmt); err != nil {
			d.close()
			return nil, fmt.Errorf("cannot create the demo's tables in %s (%v); check that the user may create tables", d.where, err)
		}
	}
	if d.outbox, err = outbox.NewStore(d.DB, d.dialect); err == nil {
		if err = d.outbox.EnsureSchema(ctx); err == nil {
			err = idempotency.EnsureSchema(ctx, d.DB, d.dialect)
		}
	}
	if err != nil {
		d.close()
		return nil, fmt.Errorf("cannot create the outbox and idempotency tables in %s (%s); check that the user may create tables", d.where, sentence(err))
	}
	return d, nil
}

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

func (d *demoDB) count(ctx context.Context, table string) (int, error) {
	var n int
	err := d.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n)
	return n, err
}
