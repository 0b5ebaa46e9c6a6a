package idempotency

import (
	"context"
	"database/sql"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/idempotency/internal/dbtest"
)

// The idempotency table is InnoDB whatever the server's default engine:
// on a server (or session) defaulting to MyISAM, which has no
// transactions, the key of a Transactional handler that panicked stayed
// recorded, so the redelivery was taken for a duplicate and the effect,
// rolled back, never happened.
func TestMySQLTransactionalKeyRollsBackWhateverTheDefaultEngine(t *testing.T) {
	db, d := dbtest.MySQLWith(map[string]string{"default_storage_engine": "MyISAM"})(t)
	ctx := context.Background()
	if err := EnsureSchema(ctx, db, d); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE balance (account VARCHAR(64) PRIMARY KEY, amount INTEGER NOT NULL) ENGINE=InnoDB`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO balance (account, amount) VALUES ('acc', 0)`); err != nil {
		t.Fatal(err)
	}
	var boom atomic.Bool
	boom.Store(true)
	h := Transactional(db, d, credit(d, &boom))
	if dec := h(ctx, msg("p1")); dec.String() != "reject" {
		t.Fatalf("panic decision %v", dec)
	}
	if dec := h(ctx, msg("p1")); dec.String() != "accept" {
		t.Fatalf("redelivery decision %v", dec)
	}
	if n := balance(t, db); n != 10 {
		t.Fatalf("balance %d after the redelivery, want 10 (the key rolled back with the panic)", n)
	}
}

// An existing table that cannot keep the guard's promises (no
// transactions, keys compared without case, latin1 text) is refused by
// EnsureSchema with the statement that fixes it, and that statement does.
func TestMySQLEnsureSchemaRefusesATableThatCannotWorkAndSaysHowToFixIt(t *testing.T) {
	for _, tc := range []struct{ name, create, want string }{
		// MyISAM keys hold at most 1000 bytes, so this one is shorter.
		{"myisam", strings.NewReplacer("ENGINE=InnoDB", "ENGINE=MyISAM", "VARBINARY(1020)", "VARBINARY(255)").Replace(mysqlSchema), "MyISAM"},
		{"text keys", `CREATE TABLE acemq_idempotency (message_id VARCHAR(255) PRIMARY KEY, state VARCHAR(16) NOT NULL,
  claimed_by VARCHAR(64), recorded_at BIGINT NOT NULL, expires_at BIGINT NOT NULL,
  INDEX acemq_idempotency_expires (expires_at)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`, "acemq_idempotency.message_id"},
		{"latin1", strings.Replace(mysqlSchema, "utf8mb4", "latin1", 1), "latin1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db, d := dbtest.MySQL(t)
			if _, err := db.ExecContext(ctx, tc.create); err != nil {
				t.Fatal(err)
			}
			err := EnsureSchema(ctx, db, d)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "; fix it with: ") {
				t.Fatalf("EnsureSchema on the %s table: %v", tc.name, err)
			}
			fix := err.Error()[strings.Index(err.Error(), "; fix it with: ")+len("; fix it with: "):]
			if _, err := db.ExecContext(ctx, fix); err != nil {
				t.Fatalf("the advised %q: %v", fix, err)
			}
			if err := EnsureSchema(ctx, db, d); err != nil {
				t.Fatalf("EnsureSchema after %q: %v", fix, err)
			}
		})
	}
}

// A MySQL server that is not in strict mode cuts a value too long for its
// column and goes on, so two long keys sharing their first 1020 bytes were
// taken for one and the second message never ran. A key longer than the
// 255 characters the column is for is refused before it reaches the
// server, as fatal (retrying cannot shorten it); 255 characters of any
// script fit.
func TestMySQLOverlongKeyIsRefusedNotCutShort(t *testing.T) {
	db, d := dbtest.MySQLWith(map[string]string{"sql_mode": "''"})(t)
	ctx := context.Background()
	s, err := NewSQLStore(db, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureSchema(ctx); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("k", 1100)
	if cl, err := s.Claim(ctx, long+"1", time.Minute); err == nil || !acemq.IsFatal(err) || !strings.Contains(err.Error(), "255 characters") {
		t.Fatalf("claim of a 1101-character key: %+v %v; want a fatal error naming the 255-character limit", cl, err)
	}
	h := Transactional(db, d, func(context.Context, *sql.Tx, *acemq.Message[pay]) acemq.Decision {
		t.Error("the handler ran for a key that cannot be recorded")
		return acemq.Accept()
	})
	if dec := h(ctx, msg(long+"2")); dec.String() != "reject" || !acemq.IsFatal(dec.Err()) {
		t.Fatalf("Transactional with a 1101-character key: %v %v", dec, dec.Err())
	}
	widest := strings.Repeat("🧾", 255)
	cl, err := s.Claim(ctx, widest, time.Minute)
	if err != nil || cl.Outcome != Claimed {
		t.Fatalf("claim of 255 four-byte characters: %+v %v", cl, err)
	}
	if err := s.Confirm(ctx, widest, cl.Token); err != nil {
		t.Fatal(err)
	}
	if again, err := s.Claim(ctx, widest, time.Minute); err != nil || again.Outcome != Duplicate {
		t.Fatalf("claim of 255 four-byte characters again: %+v %v", again, err)
	}
}
