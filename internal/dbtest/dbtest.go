// Package dbtest gives a test a database of its own: an embedded SQLite
// file in the test's temporary directory, a fresh schema on the test
// PostgreSQL server, or a fresh database on the test MariaDB server (both
// dropped at cleanup), so tests never see each other's rows.
package dbtest

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"   // registers "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"

	"github.com/acemq-go/acemq/internal/testenv"
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

// SQLite opens a fresh SQLite file (WAL, 10 s busy timeout), closed at
// cleanup.
func SQLite(t *testing.T) (*sql.DB, sqlstore.Dialect) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, sqlstore.SQLite
}

// Postgres opens the test server (testenv.PostgresURL: skipped outside CI
// without one, failed under CI) with a schema of the test's own on the
// search path, dropped at cleanup.
func Postgres(t *testing.T) (*sql.DB, sqlstore.Dialect) {
	t.Helper()
	url := testenv.PostgresURL(t)
	admin, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	schema := "t_" + RandHex(6)
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	db, err := sql.Open("pgx", url+sep+"search_path="+schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		_, _ = admin.Exec("DROP SCHEMA " + schema + " CASCADE")
		admin.Close()
	})
	return db, sqlstore.PostgreSQL
}

// MySQL opens a database of the test's own, created with the server's
// defaults on the test MariaDB server (testenv.MySQLDSN: skipped outside CI
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
		cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
		if err != nil {
			t.Fatalf("dbtest: ACEMQ_TEST_MYSQL_DSN is not a go-sql-driver/mysql DSN: %v", err)
		}
		admin, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		name := "t_" + RandHex(6)
		if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
			admin.Close()
			t.Fatal(err)
		}
		cfg.DBName = name
		for k, v := range params {
			if cfg.Params == nil {
				cfg.Params = map[string]string{}
			}
			cfg.Params[k] = v
		}
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			db.Close()
			_, _ = admin.Exec("DROP DATABASE " + name)
			admin.Close()
		})
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
func PostgresSchemaURL(t *testing.T) string {
	t.Helper()
	url := testenv.PostgresURL(t)
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
func MySQLDatabaseDSN(t *testing.T) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	if err != nil {
		t.Fatalf("dbtest: ACEMQ_TEST_MYSQL_DSN is not a go-sql-driver/mysql DSN: %v", err)
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	name := "t_" + RandHex(6)
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE " + name); admin.Close() })
	cfg.DBName = name
	return cfg.FormatDSN()
}
