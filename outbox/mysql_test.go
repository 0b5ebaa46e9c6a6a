package outbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/outbox/internal/dbtest"
)

// The outbox table is InnoDB whatever the server's default engine: on a
// server (or session) defaulting to MyISAM, which has no transactions, a
// rolled-back Add stayed in the outbox and was published.
func TestMySQLOutboxIsTransactionalWhateverTheDefaultEngine(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, backend{Name: "mysql", Open: dbtest.MySQLWith(map[string]string{"default_storage_engine": "MyISAM"})})
	c, _ := memConn(t)
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, tx, c, "", "orders", order{ID: "1"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Pending(ctx, 0); len(p) != 0 {
		t.Fatalf("a rolled-back Add left %d records", len(p))
	}
}

// An existing table that cannot keep the outbox's promises (no
// transactions, ids compared without case, headers cut at 64 KiB, latin1
// text) is refused by
// EnsureSchema with the statement that fixes it, and that statement does.
func TestMySQLEnsureSchemaRefusesATableThatCannotWorkAndSaysHowToFixIt(t *testing.T) {
	for _, tc := range []struct{ name, create, want string }{
		{"myisam", strings.Replace(mysqlSchema, "ENGINE=InnoDB", "ENGINE=MyISAM", 1), "MyISAM"},
		{"text ids", `CREATE TABLE acemq_outbox (
  seq BIGINT NOT NULL AUTO_INCREMENT UNIQUE, id VARCHAR(64) PRIMARY KEY,
  exchange_name VARCHAR(255) NOT NULL, routing_key VARCHAR(255) NOT NULL, content_type VARCHAR(255) NOT NULL,
  headers TEXT NOT NULL, body LONGBLOB NOT NULL, created_at BIGINT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
  last_error VARCHAR(1000), locked_by VARCHAR(64), locked_until BIGINT,
  INDEX acemq_outbox_attempts_seq (attempts, seq)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`, "acemq_outbox.id"},
		{"text headers", strings.Replace(mysqlSchema, "LONGTEXT", "TEXT", 1), "acemq_outbox.headers"},
		{"latin1", strings.Replace(mysqlSchema, "utf8mb4", "latin1", 1), "latin1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db, d := dbtest.MySQL(t)
			if _, err := db.ExecContext(ctx, tc.create); err != nil {
				t.Fatal(err)
			}
			s, err := NewStore(db, d)
			if err != nil {
				t.Fatal(err)
			}
			err = s.EnsureSchema(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "; fix it with: ") {
				t.Fatalf("EnsureSchema on the %s table: %v", tc.name, err)
			}
			fix := err.Error()[strings.Index(err.Error(), "; fix it with: ")+len("; fix it with: "):]
			if _, err := db.ExecContext(ctx, fix); err != nil {
				t.Fatalf("the advised %q: %v", fix, err)
			}
			if err := s.EnsureSchema(ctx); err != nil {
				t.Fatalf("EnsureSchema after %q: %v", fix, err)
			}
		})
	}
}

// Relays of different databases on one server do not wait for each other:
// the claim lock is per database, as PostgreSQL's advisory lock is. (It
// was one GET_LOCK name for the whole server, so a claim held up in one
// database held up every relay of every other for up to 30 s.)
func TestMySQLClaimWaitsForNoRelayOfAnotherDatabase(t *testing.T) {
	ctx := context.Background()
	c, _ := memConn(t)
	mine := newStore(t, backend{Name: "mysql", Open: dbtest.MySQL})
	other := newStore(t, backend{Name: "mysql", Open: dbtest.MySQL})
	add(t, mine, c, "", "orders", order{"mine", 1})
	add(t, other, c, "", "orders", order{"other", 1})
	var otherDB string
	if err := other.DB().QueryRowContext(ctx, `SELECT DATABASE()`).Scan(&otherDB); err != nil {
		t.Fatal(err)
	}

	// Hold the other database's claim inside its claim lock: its UPDATE
	// waits for rows a transaction there has locked.
	holder, err := other.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, `SELECT id FROM acemq_outbox FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() {
		_, _, err := ownerOf(t, other, "other-relay").claim(ctx, 100, nil, nil)
		held <- err
	}()
	for waiting := false; !waiting; {
		err := other.DB().QueryRowContext(ctx, `SELECT COUNT(*) > 0 FROM information_schema.PROCESSLIST WHERE DB = ? AND INFO LIKE 'UPDATE acemq_outbox SET locked_by%'`, otherDB).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-held:
			t.Fatalf("the other database's claim ended before it was held: %v", err)
		default:
		}
	}

	bound, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	recs, _, err := ownerOf(t, mine, "my-relay").claim(bound, 100, nil, nil)
	if err != nil || len(recs) != 1 {
		t.Fatalf("claim while another database's claim is held: %d records, %v", len(recs), err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Fatalf("the other database's claim: %v", err)
	}
}
