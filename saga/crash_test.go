package saga

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/saga/internal/dbtest"
	"github.com/acemq-go/acemq/sqlstore"
)

// The crash test runs a saga in a real child process (this test binary
// started again with crashRole set to the scenario), SIGKILLs it in the
// middle of a step or of a compensation, and resumes the instance with a
// Sweep in the test process.
const crashRole = "ACEMQ_SAGA_CRASH_ROLE"

// crashLease is the child's lease: short, so the sweep takes over soon
// after the kill, and long enough that on a loaded machine the child's
// renewals keep it (a runner stops at three quarters of a lease without
// one).
const crashLease = 2 * time.Second

// crashDef is the crash test's saga: three steps whose actions and
// compensations each record their idempotency key and their effect (a
// counter) in one transaction, skipping the effect when the key is there.
// Scenario "compensation" makes step c fail. When hang is set, the call
// named by the scenario (b's action, or b's compensation) announces
// "effect" on out after its effect committed and never returns: the
// process is killed there.
func crashDef(db *sql.DB, d sqlstore.Dialect, scenario string, hang bool, out io.Writer) *Definition {
	effectFn := func(kind, step string) Func {
		return func(ctx context.Context, c Call) error {
			if err := effect(ctx, db, d, kind+":"+c.IdempotencyKey, kind+":"+step); err != nil {
				return err
			}
			if hang && step == "b" && ((scenario == "action" && kind == "do") || (scenario == "compensation" && kind == "undo")) {
				fmt.Fprintln(out, "effect")
				time.Sleep(time.Hour) // killed here
			}
			return nil
		}
	}
	var steps []Step
	for _, s := range []string{"a", "b", "c"} {
		steps = append(steps, Step{Name: s, Action: effectFn("do", s), Compensate: effectFn("undo", s)})
	}
	if scenario == "compensation" {
		steps[2].Action = func(context.Context, Call) error { return errors.New("out of stock") }
	}
	def, err := Define("crash-"+scenario, steps...)
	if err != nil {
		panic(err)
	}
	return def
}

// effect records key and increments counter in one transaction; a key
// already recorded means the effect happened: nothing to do.
func effect(ctx context.Context, db *sql.DB, d sqlstore.Dialect, key, counter string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, d.Rebind(`INSERT INTO crash_key (k) VALUES (?)`), key); err != nil {
		if sqlstore.IsUniqueViolation(err) {
			return nil
		}
		return err
	}
	if _, err := tx.ExecContext(ctx, d.Rebind(`UPDATE crash_counter SET n = n + 1 WHERE name = ?`), counter); err != nil {
		return err
	}
	return tx.Commit()
}

func openCrashDB(dialect, dsn string) (*sql.DB, sqlstore.Dialect, error) {
	d, err := sqlstore.ParseDialect(dialect)
	if err != nil {
		return nil, 0, err
	}
	driver := map[sqlstore.Dialect]string{sqlstore.PostgreSQL: "pgx", sqlstore.SQLite: "sqlite", sqlstore.MySQL: "mysql"}[d]
	db, err := sql.Open(driver, dsn)
	return db, d, err
}

// runCrashChild is the child process: it runs one instance of the
// scenario's saga until killed.
func runCrashChild() int {
	db, d, err := openCrashDB(os.Getenv("ACEMQ_SAGA_CRASH_DIALECT"), os.Getenv("ACEMQ_SAGA_CRASH_DSN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer db.Close()
	r, err := NewRunner(db, d, WithLease(crashLease), WithOwner("child"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	res, err := r.Run(context.Background(), crashDef(db, d, os.Getenv(crashRole), true, os.Stdout), []byte("order-7"), "text/plain")
	fmt.Fprintf(os.Stderr, "the child was not killed: %+v %v\n", res, err)
	return 1
}

func TestCrashInTheMiddleOfAStepOrACompensationIsResumedBySweep(t *testing.T) {
	backends := []struct {
		name string
		open func(t *testing.T) (dialect, dsn string)
	}{
		{"sqlite", func(t *testing.T) (string, string) {
			return "sqlite", "file:" + filepath.Join(t.TempDir(), "crash.db") + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
		}},
		{"postgres", func(t *testing.T) (string, string) { return "postgres", dbtest.PostgresSchemaURL(t) }},
		{"mysql", func(t *testing.T) (string, string) { return "mysql", dbtest.MySQLDatabaseDSN(t) }},
	}
	for _, b := range backends {
		for _, scenario := range []string{"action", "compensation"} {
			t.Run(b.name+"/"+scenario, func(t *testing.T) {
				dialect, dsn := b.open(t)
				db, d, err := openCrashDB(dialect, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				crashOnce(t, db, d, dialect, dsn, scenario)
			})
		}
	}
}

func crashOnce(t *testing.T, db *sql.DB, d sqlstore.Dialect, dialect, dsn, scenario string) {
	ctx := context.Background()
	if err := EnsureSchema(ctx, db, d); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`CREATE TABLE crash_key (k VARCHAR(255) PRIMARY KEY)`, `CREATE TABLE crash_counter (name VARCHAR(64) PRIMARY KEY, n INTEGER NOT NULL)`} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range []string{"do", "undo"} {
		for _, s := range []string{"a", "b", "c"} {
			if _, err := db.ExecContext(ctx, d.Rebind(`INSERT INTO crash_counter (name, n) VALUES (?, 0)`), kind+":"+s); err != nil {
				t.Fatal(err)
			}
		}
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashRole+"="+scenario, "ACEMQ_SAGA_CRASH_DIALECT="+dialect, "ACEMQ_SAGA_CRASH_DSN="+dsn)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	announced := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "effect" {
				announced <- true
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(announced)
	}()
	select {
	case ok := <-announced:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("the child ended before its effect: %s", stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child did not reach its effect in 30 s: %s", stderr.String())
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: nothing runs after the effect
		t.Fatal(err)
	}
	_ = cmd.Wait()
	<-announced

	store, _ := NewStore(db, d)
	list, err := store.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("instances after the kill: %+v %v", list, err)
	}
	inst, err := store.Show(ctx, list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus, wantStep := "running", "running"
	if scenario == "compensation" {
		wantStatus, wantStep = "compensating", "compensating"
	}
	if inst.Status != wantStatus || inst.LockedBy == "" || inst.Steps[1].Status != wantStep {
		t.Fatalf("instance left by the killed child: %+v", inst)
	}

	r, err := NewRunner(db, d, WithLease(crashLease), WithOwner("survivor"))
	if err != nil {
		t.Fatal(err)
	}
	def := crashDef(db, d, scenario, false, io.Discard)
	if err := r.Register(def); err != nil {
		t.Fatal(err)
	}
	var results []Result
	deadline := time.Now().Add(30 * time.Second)
	for len(results) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no sweep resumed the instance in 30 s")
		}
		results, err = r.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(results) == 0 {
			time.Sleep(50 * time.Millisecond) // poll until the child's lease expires
		}
	}
	res := results[0]
	want := map[string]int{"do:a": 1, "do:b": 1, "do:c": 1, "undo:a": 0, "undo:b": 0, "undo:c": 0}
	wantOutcome := Completed
	if scenario == "compensation" {
		want = map[string]int{"do:a": 1, "do:b": 1, "do:c": 0, "undo:a": 1, "undo:b": 1, "undo:c": 0}
		wantOutcome = Compensated
	}
	if res.InstanceID != inst.ID || res.Outcome != wantOutcome {
		t.Fatalf("resumed %+v, want %s", res, wantOutcome)
	}
	rows, err := db.QueryContext(ctx, `SELECT name, n FROM crash_counter`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		got[name] = n
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("effects %v, want %v: every action and compensation must take effect exactly once", got, want)
		}
	}
	after, _ := store.Show(ctx, inst.ID)
	// Step b ran again after the kill: its attempts prove the re-run.
	if wantAttempts := map[string]int{"action": 2, "compensation": 3}[scenario]; after.Steps[1].Attempts != wantAttempts || after.LockedBy != "" {
		t.Fatalf("after the resume %+v", after)
	}
}
