package outbox

import (
	"context"
	"database/sql"
	"runtime"
	"testing"

	"github.com/acemq-go/acemq/outbox/internal/dbtest"
	"github.com/acemq-go/acemq/outbox/internal/testenv"
	"github.com/acemq-go/acemq/sqlstore"
)

// postgresForBench opens the test server with a schema of the benchmark's
// own, dropped at the end (dbtest.Postgres for a *testing.B).
func postgresForBench(b *testing.B) *sql.DB {
	b.Helper()
	url := testenv.PostgresURL(b)
	admin, err := sql.Open("pgx", url)
	if err != nil {
		b.Fatal(err)
	}
	schema := "b_" + dbtest.RandHex(6)
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("pgx", url+"&search_path="+schema)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		db.Close()
		_, _ = admin.Exec("DROP SCHEMA " + schema + " CASCADE")
		admin.Close()
	})
	return db
}

// BenchmarkAddOnPostgres measures Store.Add with one record per
// transaction and 32 producers at once on the test PostgreSQL server: as
// Add notifies (pg_notify inside the insert), as it used to (the insert,
// then a pg_notify statement of its own) and without a notify at all.
// PostgreSQL serialises the commits of notifying transactions (a
// database-wide lock taken at pre-commit), so a notify could cap
// concurrent producers. docs/performance.md has the numbers and the
// command.
func BenchmarkAddOnPostgres(b *testing.B) {
	for _, mode := range []struct {
		name string
		mode notifyMode
	}{{"notify_in_insert", notifyInInsert}, {"notify_apart", notifyApart}, {"no_notify", notifyNone}} {
		b.Run(mode.name, func(b *testing.B) {
			db := postgresForBench(b)
			d := sqlstore.PostgreSQL
			db.SetMaxOpenConns(32)
			db.SetMaxIdleConns(32)
			s, err := NewStore(db, d)
			if err != nil {
				b.Fatal(err)
			}
			s.notify = mode.mode
			ctx := context.Background()
			if err := s.EnsureSchema(ctx); err != nil {
				b.Fatal(err)
			}
			c, _ := memConn(b)
			b.SetParallelism(max(32/runtime.GOMAXPROCS(0), 1)) // 32 producers
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := s.Add(ctx, tx, c, "", "orders", order{"a", 1}); err != nil {
						tx.Rollback()
						b.Error(err)
						return
					}
					if err := tx.Commit(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
