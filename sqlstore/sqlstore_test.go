package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq-go/acemq/sqlstore"
	"github.com/acemq-go/acemq/sqlstore/internal/dbtest"
)

func TestRebindNumbersPlaceholdersForPostgresOnly(t *testing.T) {
	q := `SELECT '?' , a FROM t WHERE a = ? AND b = ?`
	if got := sqlstore.PostgreSQL.Rebind(q); got != `SELECT '?' , a FROM t WHERE a = $1 AND b = $2` {
		t.Fatalf("postgres: %s", got)
	}
	for _, d := range []sqlstore.Dialect{sqlstore.SQLite, sqlstore.MySQL} {
		if got := d.Rebind(q); got != q {
			t.Fatalf("%s: %s", d, got)
		}
	}
}

func TestListWritesOnePlaceholderPerValue(t *testing.T) {
	for n, want := range map[int]string{1: "?", 3: "?, ?, ?"} {
		if got := sqlstore.List(n); got != want {
			t.Fatalf("List(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestDialectValidateAndParse(t *testing.T) {
	if err := sqlstore.Dialect(0).Validate(); err == nil {
		t.Fatal("zero dialect accepted")
	}
	for name, want := range map[string]sqlstore.Dialect{"postgres": sqlstore.PostgreSQL, "PGX": sqlstore.PostgreSQL, "sqlite3": sqlstore.SQLite, "mysql": sqlstore.MySQL} {
		if d, err := sqlstore.ParseDialect(name); err != nil || d != want {
			t.Fatalf("%s → %v %v", name, d, err)
		}
	}
	if _, err := sqlstore.ParseDialect("oracle"); err == nil {
		t.Fatal("oracle accepted")
	}
}

type fakeResult struct{}

func (fakeResult) LastInsertId() (int64, error) { return 0, nil }
func (fakeResult) RowsAffected() (int64, error) { return 0, errors.New("not supported") }

func TestUnknownRowsAffectedIsAnError(t *testing.T) {
	if _, err := sqlstore.RowsAffected(fakeResult{}); !errors.Is(err, sqlstore.ErrRowsAffectedUnknown) {
		t.Fatalf("err = %v", err)
	}
}

// MySQLError mirrors go-sql-driver/mysql's error type, which the
// detector reads by name without importing the driver.
type MySQLError struct {
	Number  uint16
	Message string
}

func (e *MySQLError) Error() string { return e.Message }

func TestMySQLDuplicateKeyIsAUniqueViolation(t *testing.T) {
	if !sqlstore.IsUniqueViolation(fmt.Errorf("insert: %w", &MySQLError{Number: 1062, Message: "Duplicate entry 'a' for key 'PRIMARY'"})) {
		t.Fatal("1062 not detected")
	}
	if sqlstore.IsUniqueViolation(&MySQLError{Number: 1452, Message: "Cannot add or update a child row"}) {
		t.Fatal("a foreign-key error (1452) taken for a duplicate")
	}
}

type pgError struct{ code string }

func (e *pgError) Error() string    { return "pg error " + e.code }
func (e *pgError) SQLState() string { return e.code }

func TestDeadlockIsRecognisedInEveryDialect(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("insert: %w", &MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}),
		fmt.Errorf("insert: %w", &pgError{"40P01"}),
	} {
		if !sqlstore.IsDeadlock(err) {
			t.Fatalf("%v not taken for a deadlock", err)
		}
	}
	for _, err := range []error{
		nil, context.Canceled,
		&MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"},
		&MySQLError{Number: 1062, Message: "Duplicate entry"},
		&pgError{"23505"},
	} {
		if sqlstore.IsDeadlock(err) {
			t.Fatalf("%v taken for a deadlock", err)
		}
	}
}

// Real drivers: a duplicate key is a unique violation; a NOT NULL
// violation, a missing table or a syntax error is not.
func TestUniqueViolationOnRealDatabases(t *testing.T) {
	for _, b := range dbtest.Dialects {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			db, _ := b.Open(t)
			table := "acemq_unique_probe"
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(ctx, "CREATE TEMPORARY TABLE "+table+" (k VARCHAR(10) PRIMARY KEY, v VARCHAR(10) NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(ctx, "INSERT INTO "+table+" (k, v) VALUES ('a', 'x')"); err != nil {
				t.Fatal(err)
			}
			_, dup := conn.ExecContext(ctx, "INSERT INTO "+table+" (k, v) VALUES ('a', 'y')")
			_, notNull := conn.ExecContext(ctx, "INSERT INTO "+table+" (k, v) VALUES ('b', NULL)")
			_, missing := conn.ExecContext(ctx, "INSERT INTO no_such_table_here (k) VALUES ('a')")
			_, syntax := conn.ExecContext(ctx, "INSERT INTO "+table+" (k, v) VALUES ('c'")
			if !sqlstore.IsUniqueViolation(dup) {
				t.Fatalf("duplicate key not detected: %v", dup)
			}
			for _, e := range []error{notNull, missing, syntax, nil, context.Canceled} {
				if sqlstore.IsUniqueViolation(e) {
					t.Fatalf("%v taken for a unique violation", e)
				}
			}
		})
	}
}

func TestDetectNamesTheDriversDialect(t *testing.T) {
	for _, tc := range []struct {
		driver, dsn string
		want        sqlstore.Dialect
	}{
		{"sqlite", "file:none.db", sqlstore.SQLite},
		{"pgx", "postgres://nobody@127.0.0.1:1/none", sqlstore.PostgreSQL},
		{"mysql", "nobody@tcp(127.0.0.1:1)/none", sqlstore.MySQL},
	} {
		db, err := sql.Open(tc.driver, tc.dsn)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sqlstore.Detect(db)
		db.Close()
		if err != nil || got != tc.want {
			t.Fatalf("%s: %v %v, want %v", tc.driver, got, err, tc.want)
		}
	}
}

func TestNowMillisIsTheDatabasesEpochClockInEveryDialect(t *testing.T) {
	for _, b := range dbtest.Dialects {
		t.Run(b.Name, func(t *testing.T) {
			db, d := b.Open(t)
			ctx := context.Background()
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// A session time zone far from UTC must not move the reading.
			switch d {
			case sqlstore.PostgreSQL:
				_, err = conn.ExecContext(ctx, `SET TIME ZONE '+05:00'`)
			case sqlstore.MySQL:
				_, err = conn.ExecContext(ctx, `SET time_zone = '-07:00'`)
			}
			if err != nil {
				t.Fatal(err)
			}
			before := time.Now().UnixMilli()
			var got int64
			if err := conn.QueryRowContext(ctx, `SELECT `+d.NowMillis()).Scan(&got); err != nil {
				t.Fatalf("%s: %v", d.NowMillis(), err)
			}
			after := time.Now().UnixMilli()
			// The server runs on this host: its clock is this one's, to
			// the millisecond it rounds to.
			if got < before-1 || got > after+1 {
				t.Fatalf("%s read %d, want between %d and %d", d, got, before, after)
			}
		})
	}
}
