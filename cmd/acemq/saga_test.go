package main

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acemq-go/acemq/cmd/acemq/internal/dbtest"
	"github.com/acemq-go/acemq/saga"
	"github.com/acemq-go/acemq/sqlstore"
)

// The operator's saga commands on each dialect's --db form (a SQLite
// file, a PostgreSQL URL, mysql:<DSN> on MariaDB): an unresolved instance
// is listed and shown, compensate hands it back to the sweep, resolve
// closes another.
func TestSagaCommandsListShowCompensateResolve(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(t *testing.T) (driver, dsn, flag string, d sqlstore.Dialect)
	}{
		{"sqlite", func(t *testing.T) (string, string, string, sqlstore.Dialect) {
			path := filepath.Join(t.TempDir(), "saga.db")
			return "sqlite", path, "sqlite:" + path, sqlstore.SQLite
		}},
		{"postgres", func(t *testing.T) (string, string, string, sqlstore.Dialect) {
			url := dbtest.PostgresSchemaURL(t)
			return "pgx", url, url, sqlstore.PostgreSQL
		}},
		{"mysql", func(t *testing.T) (string, string, string, sqlstore.Dialect) {
			dsn := dbtest.MySQLDatabaseDSN(t)
			return "mysql", dsn, "mysql:" + dsn, sqlstore.MySQL
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			driver, dsn, flag, d := b.open(t)
			db, err := sql.Open(driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			sagaCommands(t, db, d, flag)
		})
	}
	// Once, not per dialect: every subcommand's help, and the sentence for
	// a database without the tables.
	for _, sub := range []string{"list", "show", "resolve", "compensate"} {
		if r := run0(t, "", "saga", sub, "--help"); !strings.Contains(r.stdout, "Examples:") || !strings.Contains(r.stdout, "--db") {
			t.Errorf("acemq saga %s --help lacks an example or --db:\n%s", sub, r.stdout)
		}
	}
	empty := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"saga", "list", "--db", "sqlite:" + empty}
	mustFailWithSentence(t, acemqCmd(t, "", args...), "EnsureSchema", args...)
}

// A --db sqlite:PATH whose file does not exist is refused, and the command
// leaves no file behind: an operator's typo must not create an empty
// database that then answers "no sagas".
func TestSagaCommandsNeverCreateADatabase(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.db")
	for _, sub := range [][]string{{"list"}, {"show", "x"}, {"resolve", "x", "--note", "n"}, {"compensate", "x"}} {
		args := append(append([]string{"saga"}, sub...), "--db", "sqlite:"+missing)
		mustFailWithSentence(t, acemqCmd(t, "", args...), "never creates one", args...)
		if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("acemq %s left %s behind (stat: %v)", strings.Join(args, " "), missing, err)
		}
	}
}

func sagaCommands(t *testing.T, db *sql.DB, d sqlstore.Dialect, dsn string) {
	ctx := context.Background()
	r, err := saga.NewRunner(db, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.EnsureSchema(ctx); err != nil {
		t.Fatal(err)
	}
	broken := func(context.Context, saga.Call) error { return errors.New("refund service down") }
	def, _ := saga.Define("order",
		saga.Step{Name: "charge", Action: func(context.Context, saga.Call) error { return nil }, Compensate: broken},
		saga.Step{Name: "ship", Action: func(context.Context, saga.Call) error { return errors.New("no courier") }})
	a, err := r.Run(ctx, def, nil, "")
	if err != nil || a.Outcome != saga.Unresolved {
		t.Fatalf("run %+v %v", a, err)
	}
	b, _ := r.Run(ctx, def, nil, "")

	out := run0(t, "", "saga", "list", "--status", "unresolved", "--db", dsn).stdout
	if !strings.Contains(out, a.InstanceID) || !strings.Contains(out, b.InstanceID) || !strings.Contains(out, "unresolved") {
		t.Fatalf("list:\n%s", out)
	}
	out = run0(t, "", "saga", "show", a.InstanceID, "--db", dsn).stdout
	if !strings.Contains(out, "compensation_failed") || !strings.Contains(out, "refund service down") || !strings.Contains(out, "failed    ship: no courier") {
		t.Fatalf("show:\n%s", out)
	}
	run0(t, "", "saga", "compensate", a.InstanceID, "--db", dsn)
	run0(t, "", "saga", "resolve", b.InstanceID, "--note", "ticket 42", "--db", dsn)
	if in, _ := r.Show(ctx, a.InstanceID); in.Status != "compensating" || in.Steps[0].Status != "done" {
		t.Fatalf("after compensate: %+v", in)
	}
	if in, _ := r.Show(ctx, b.InstanceID); in.Status != "compensated" || !strings.Contains(in.Failure, "ticket 42") {
		t.Fatalf("after resolve: %+v", in)
	}
	args := []string{"saga", "resolve", b.InstanceID, "--db", dsn}
	mustFailWithSentence(t, acemqCmd(t, "", args...), "is not unresolved", args...)
}
