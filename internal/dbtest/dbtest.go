// Package dbtest gives a test a database of its own: an embedded SQLite
// file in the test's temporary directory, a fresh schema on the test
// PostgreSQL server, or a fresh database on the test MariaDB server (both
// dropped at cleanup), so tests never see each other's rows.
//
// The package imports no SQL driver, so that a module whose tests use it
// does not list a driver its users did not choose (docs/installing.md):
// it opens databases by driver name ("sqlite", "pgx", "mysql"), and the
// drivers reach the test binary through `go test -overlay` (the Makefile's
// test targets pass scripts/sqldrivers.sh's overlay, which adds a file
// importing them to every package that imports dbtest). A test binary
// without a driver skips the test saying so, or fails it under CI=true or
// ACEMQ_REQUIRE_SERVICES=1, as a missing service does.
//
// This directory is the source: go run ./internal/tools/sharedcopy copies
// it into each module that imports <module>/internal/dbtest.
package dbtest

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acemq-go/acemq/sqlstore"
)

// Opener opens a database for one test.
type Opener func(t *testing.T) (*sql.DB, sqlstore.Dialect)

// Backend is an opener and its name (the subtest's name).
type Backend struct {
	Name string
	Open Opener
}

// Dialects lists every opener by name, for table-driven tests.
var Dialects = []Backend{
	{"sqlite", SQLite},
	{"postgres", Postgres},
	{"mysql", MySQL},
}

// required reports whether a missing service or driver must fail tests
// (testenv.Required's rule).
func required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("ACEMQ_REQUIRE_SERVICES") == "1"
}

func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if required() {
		t.Fatalf("%s (required under CI=true / ACEMQ_REQUIRE_SERVICES=1)", msg)
	}
	t.Skip(msg)
}

// Driver skips or fails the test, as a missing service does, unless the
// database/sql driver named name is linked into the test binary.
func Driver(t testing.TB, name string) {
	t.Helper()
	if !slices.Contains(sql.Drivers(), name) {
		missing(t, "dbtest: no database/sql driver %q is linked into this test binary; the Makefile's test targets link the drivers with -overlay (scripts/sqldrivers.sh), by hand: go test -overlay \"$(scripts/sqldrivers.sh)\" ./...", name)
	}
}

// PostgresURL returns the URL of the test PostgreSQL server
// (ACEMQ_TEST_POSTGRES_URL), after checking that the "pgx" driver is
// linked.
func PostgresURL(t testing.TB) string {
	t.Helper()
	Driver(t, "pgx")
	v := os.Getenv("ACEMQ_TEST_POSTGRES_URL")
	if v == "" {
		missing(t, "ACEMQ_TEST_POSTGRES_URL is not set, so this PostgreSQL test cannot run; `make test` starts a private cluster and sets it")
	}
	return v
}

// MySQLDSN returns the go-sql-driver/mysql DSN of the test MariaDB server
// (ACEMQ_TEST_MYSQL_DSN), after checking that the "mysql" driver is
// linked.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	Driver(t, "mysql")
	v := os.Getenv("ACEMQ_TEST_MYSQL_DSN")
	if v == "" {
		missing(t, "ACEMQ_TEST_MYSQL_DSN is not set, so this MySQL test cannot run; `make test` starts a private MariaDB server and sets it")
	}
	return v
}

// SQLite opens a fresh SQLite file (WAL, 10 s busy timeout), closed at
// cleanup.
func SQLite(t *testing.T) (*sql.DB, sqlstore.Dialect) {
	t.Helper()
	Driver(t, "sqlite")
	path := filepath.Join(t.TempDir(), "test.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, sqlstore.SQLite
}

// Postgres opens the test server (PostgresURL: skipped outside CI without
// one, failed under CI) with a schema of the test's own on the search
// path, dropped at cleanup.
func Postgres(t *testing.T) (*sql.DB, sqlstore.Dialect) {
	t.Helper()
	db, err := sql.Open("pgx", PostgresSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() }) // before the schema's drop: cleanups run last first
	return db, sqlstore.PostgreSQL
}

// MySQL opens a database of the test's own, created with the server's
// defaults on the test MariaDB server (MySQLDSN: skipped outside CI
// without one, failed under CI) and dropped at cleanup.
func MySQL(t *testing.T) (*sql.DB, sqlstore.Dialect) {
	t.Helper()
	return MySQLWith(nil)(t)
}

// MySQLWith is MySQL with extra DSN parameters; go-sql-driver/mysql sets
// the ones it does not know as session variables on every connection
// (say {"default_storage_engine": "MyISAM"}).
func MySQLWith(params map[string]string) Opener {
	return func(t *testing.T) (*sql.DB, sqlstore.Dialect) {
		t.Helper()
		db, err := sql.Open("mysql", withParams(MySQLDatabaseDSN(t), params))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db, sqlstore.MySQL
	}
}

// RandHex returns n random bytes as hex, for unique names.
func RandHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// PostgresSchemaURL is Postgres for a test that opens the database itself
// (another process, a command's --db): the test server's URL with a
// fresh schema on its search_path, dropped at cleanup.
func PostgresSchemaURL(t testing.TB) string {
	t.Helper()
	url := PostgresURL(t)
	admin, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	schema := "t_" + RandHex(6)
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		admin.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP SCHEMA " + schema + " CASCADE"); admin.Close() })
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + schema
}

// MySQLDatabaseDSN is MySQL for a test that opens the database itself: a
// go-sql-driver/mysql DSN naming a fresh database on the test MariaDB
// server, dropped at cleanup.
func MySQLDatabaseDSN(t testing.TB) string {
	t.Helper()
	dsn := MySQLDSN(t)
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := "t_" + RandHex(6)
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE " + name); admin.Close() })
	return MySQLDSNFor(t, name)
}

// MySQLDSNFor returns the test MariaDB server's DSN (MySQLDSN) with its
// database name replaced by name.
func MySQLDSNFor(t testing.TB, name string) string {
	t.Helper()
	dsn := MySQLDSN(t)
	// [user[:password]@][net[(addr)]]/dbname[?params]: the database name
	// follows the last slash (a password may hold one too).
	slash := strings.LastIndex(dsn, "/")
	if slash < 0 {
		t.Fatalf("dbtest: ACEMQ_TEST_MYSQL_DSN %q is not a go-sql-driver/mysql DSN (no /dbname)", dsn)
	}
	rest := dsn[slash+1:]
	query := ""
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		query = rest[q:]
	}
	return dsn[:slash+1] + name + query
}

// withParams adds params to a go-sql-driver/mysql DSN, each value
// query-escaped as the driver's FormatDSN writes it.
func withParams(dsn string, params map[string]string) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		sep := "?"
		if strings.Contains(dsn[strings.LastIndex(dsn, "/")+1:], "?") {
			sep = "&"
		}
		dsn += sep + k + "=" + url.QueryEscape(params[k])
	}
	return dsn
}
