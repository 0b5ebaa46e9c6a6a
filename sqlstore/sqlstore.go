// Package sqlstore holds the database/sql helpers the AceMQ SQL stores
// (outbox, idempotency) share: the three dialects (PostgreSQL, SQLite,
// MySQL), placeholder rewriting, unique-violation and deadlock detection
// and a strict rows-affected read.
//
// The rules it encodes come from the AceMQ behaviour spec §7: keys are
// bound as text, rows are read by column name, only a real unique
// violation (SQLSTATE 23505, MySQL error 1062, SQLite "UNIQUE constraint
// failed") means "already there", and a driver that cannot report rows
// affected is an error where a claim depends on it.
//
// The package imports no driver: callers register the driver they use
// (github.com/jackc/pgx/v5/stdlib, modernc.org/sqlite,
// github.com/go-sql-driver/mysql) and open the *sql.DB themselves.
//
// What is tested: every dialect against a real database in `make test`:
// SQLite with modernc.org/sqlite, PostgreSQL 15 with pgx, and the MySQL
// dialect on MariaDB 10.11 with go-sql-driver/mysql. MySQL 8 itself is not
// run here.
//
// The manual's pages on the patterns and their SQL stores: https://github.com/acemq-go/acemq/blob/main/docs/patterns.md
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Dialect names the SQL flavour a store speaks. The zero value is not a
// dialect; Validate refuses it.
type Dialect int

const (
	// PostgreSQL: $n placeholders, BYTEA, identity columns, advisory locks,
	// LISTEN/NOTIFY. Tested against a real server.
	PostgreSQL Dialect = iota + 1
	// SQLite: ? placeholders, one writer at a time (the database file is
	// the lock). Tested with modernc.org/sqlite.
	SQLite
	// MySQL (InnoDB): ? placeholders, AUTO_INCREMENT, GET_LOCK, no
	// LISTEN/NOTIFY (relays poll). Tested against MariaDB 10.11 with
	// github.com/go-sql-driver/mysql (scripts/mariadb.sh starts one with
	// MariaDB's compiled-in defaults); MySQL 8 itself is not run by the
	// tests.
	MySQL
)

// String returns "postgres", "sqlite" or "mysql".
func (d Dialect) String() string {
	switch d {
	case PostgreSQL:
		return "postgres"
	case SQLite:
		return "sqlite"
	case MySQL:
		return "mysql"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

// Validate returns an error naming the accepted dialects when d is not one.
func (d Dialect) Validate() error {
	switch d {
	case PostgreSQL, SQLite, MySQL:
		return nil
	}
	return fmt.Errorf("acemq: %s is not a SQL dialect; use sqlstore.PostgreSQL, sqlstore.SQLite or sqlstore.MySQL", d)
}

// ParseDialect reads "postgres"/"postgresql"/"pgx", "sqlite"/"sqlite3" or
// "mysql" (any case).
func ParseDialect(name string) (Dialect, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "postgres", "postgresql", "pgx":
		return PostgreSQL, nil
	case "sqlite", "sqlite3":
		return SQLite, nil
	case "mysql":
		return MySQL, nil
	}
	return 0, fmt.Errorf("acemq: unknown SQL dialect %q; use postgres, sqlite or mysql", name)
}

// Detect guesses the dialect from the driver behind db (pgx's stdlib
// driver or lib/pq → PostgreSQL, modernc.org/sqlite or mattn/go-sqlite3 →
// SQLite, go-sql-driver/mysql → MySQL). It fails for any other driver:
// pass the dialect explicitly then.
func Detect(db *sql.DB) (Dialect, error) {
	t := reflect.TypeOf(db.Driver())
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	path := t.PkgPath()
	switch {
	case strings.Contains(path, "jackc/pgx"), strings.Contains(path, "lib/pq"):
		return PostgreSQL, nil
	case strings.Contains(path, "sqlite"):
		return SQLite, nil
	case strings.Contains(path, "mysql"):
		return MySQL, nil
	}
	return 0, fmt.Errorf("acemq: cannot tell the SQL dialect of driver %s.%s; pass sqlstore.PostgreSQL, sqlstore.SQLite or sqlstore.MySQL", path, t.Name())
}

// Rebind rewrites a query written with ? placeholders for the dialect:
// PostgreSQL gets $1, $2, ...; the others are returned unchanged. A ?
// inside a single-quoted literal is left alone.
func (d Dialect) Rebind(query string) string {
	if d != PostgreSQL {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n, quoted := 0, false
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'':
			quoted = !quoted
			b.WriteByte(c)
		case c == '?' && !quoted:
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// List returns n placeholders, "?, ?, ?", for an IN list of n values
// (n ≥ 1).
func List(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// BlobType is the column type for bytes: BYTEA, BLOB or LONGBLOB.
func (d Dialect) BlobType() string {
	switch d {
	case PostgreSQL:
		return "BYTEA"
	case MySQL:
		return "LONGBLOB"
	}
	return "BLOB"
}

// NowMillis returns a SQL expression for the database server's current
// time in epoch milliseconds (a BIGINT), for leases that several
// processes compare: written and compared on the one clock they share,
// never on each process's own. PostgreSQL reads clock_timestamp() (the
// time as the statement runs, not the transaction's start), MySQL
// UTC_TIMESTAMP(6) (no time-zone conversion, so a daylight-saving change
// cannot shift it), SQLite julianday('now') (SQLite runs in the process,
// so its clock is the process's: one host shares it). It takes no
// argument.
func (d Dialect) NowMillis() string {
	switch d {
	case PostgreSQL:
		return `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT`
	case MySQL:
		return `(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)`
	}
	return `CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)`
}

// IsUniqueViolation reports whether err is a unique-key (or primary-key)
// violation, and nothing else: PostgreSQL SQLSTATE 23505, MySQL error
// 1062, SQLite extended codes 2067/1555 or "UNIQUE constraint failed". A
// foreign-key, not-null or check violation, a lost connection or a
// timeout is not one.
func IsUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) && st.SQLState() == "23505" {
		return true
	}
	var coder interface{ Code() int }
	if errors.As(err, &coder) {
		if c := coder.Code(); c == 2067 || c == 1555 {
			return true
		}
	}
	if mysqlNumber(err) == 1062 {
		return true
	}
	return strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// IsDeadlock reports whether err says the database chose this transaction
// as a deadlock's victim and rolled it back, so running it again may
// succeed: PostgreSQL SQLSTATE 40P01, MySQL error 1213.
func IsDeadlock(err error) bool {
	if err == nil {
		return false
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) && st.SQLState() == "40P01" {
		return true
	}
	return mysqlNumber(err) == 1213
}

// mysqlNumber reads go-sql-driver/mysql's MySQLError.Number without
// importing the driver; 0 when err holds no such error.
func mysqlNumber(err error) uint16 {
	for e := err; e != nil; e = errors.Unwrap(e) {
		v := reflect.ValueOf(e)
		for v.Kind() == reflect.Pointer && !v.IsNil() {
			v = v.Elem()
		}
		if v.Kind() == reflect.Struct && v.Type().Name() == "MySQLError" {
			if f := v.FieldByName("Number"); f.IsValid() && f.CanUint() {
				return uint16(f.Uint())
			}
		}
	}
	return 0
}

// ErrRowsAffectedUnknown matches the error RowsAffected returns when the
// driver cannot say how many rows a statement changed.
var ErrRowsAffectedUnknown = errors.New("acemq: the database driver cannot report how many rows a statement changed, which a claim depends on; use a driver that reports rows affected")

// Querier is what Column reads through: a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Column runs a query selecting one text column and returns its values as
// arguments, ready to pass to an IN list written with List.
func Column(ctx context.Context, q Querier, query string, args ...any) ([]any, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var values []any
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		values = append(values, v)
	}
	return values, rows.Err()
}

// RowsAffected returns res.RowsAffected, turning a driver's refusal into
// an error that wraps ErrRowsAffectedUnknown (never 0 or -1 taken on trust).
func RowsAffected(res sql.Result) (int64, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrRowsAffectedUnknown, err)
	}
	if n < 0 {
		return 0, ErrRowsAffectedUnknown
	}
	return n, nil
}

// Columns maps the column names of rows to their positions, so stores
// read rows by name whatever order a SELECT or a view returns them in.
// It fails when a wanted column is missing.
func Columns(rows *sql.Rows, want ...string) (map[string]int, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	idx := make(map[string]int, len(cols))
	for i, c := range cols {
		idx[strings.ToLower(c)] = i
	}
	for _, w := range want {
		if _, ok := idx[w]; !ok {
			return nil, fmt.Errorf("acemq: the query returned no column %q (got %v); the table does not have the expected schema", w, cols)
		}
	}
	return idx, nil
}

// ScanNamed scans the current row into the destinations named by dest
// (column name → pointer), in whatever order the columns come. Columns
// not named are discarded.
func ScanNamed(rows *sql.Rows, idx map[string]int, dest map[string]any) error {
	targets := make([]any, len(idx))
	for i := range targets {
		targets[i] = new(any)
	}
	for name, p := range dest {
		i, ok := idx[name]
		if !ok {
			return fmt.Errorf("acemq: no column %q in the result", name)
		}
		targets[i] = p
	}
	return rows.Scan(targets...)
}
