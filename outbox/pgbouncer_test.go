package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/outbox/internal/dbtest"
	"github.com/acemq-go/acemq/outbox/internal/testenv"
	"github.com/acemq-go/acemq/sqlstore"
)

// pgbouncer starts a PgBouncer of the test's own in front of the test
// PostgreSQL server, in pool mode mode, with search_path set to a fresh
// schema on every server connection; it returns a pgx URL through it.
func pgbouncer(t *testing.T, mode string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/pgbouncer"); err != nil {
			if testenv.Required() {
				t.Fatal("pgbouncer is not installed; scripts/postgres.sh install installs it")
			}
			t.Skip("pgbouncer is not installed; scripts/postgres.sh install installs it")
		}
	}
	schemaURL := dbtest.PostgresSchemaURL(t)
	u, err := url.Parse(schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// A directory of its own that the unprivileged user PgBouncer runs
	// as (when the test runs as root) can read: t.TempDir's parent is
	// private.
	dir, err := os.MkdirTemp("", "acemq-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	user := u.User.Username()
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(fmt.Sprintf("%q \"\"\n", user)), 0o600); err != nil {
		t.Fatal(err)
	}
	ini := fmt.Sprintf(`[databases]
acemq = host=%s port=%s dbname=%s user=%s connect_query='SET search_path TO %s'
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
default_pool_size = 4
ignore_startup_parameters = extra_float_digits
`, u.Hostname(), u.Port(), strings.TrimPrefix(u.Path, "/"), user, schema, port, filepath.Join(dir, "users.txt"), mode)
	conf := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(conf, []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, conf)
	if os.Geteuid() == 0 {
		cmd.Args = append(cmd.Args, "-u", "nobody") // PgBouncer refuses to run as root
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{conf, filepath.Join(dir, "users.txt")} {
			if err := os.Chmod(f, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	out, _ := os.Create(filepath.Join(dir, "stdout.log"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		out.Close()
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "stdout.log"))
			t.Fatalf("pgbouncer did not listen within 10 s: %v\n%s", err, log)
		}
		time.Sleep(20 * time.Millisecond) // polling for the listener
	}
	// pgx's statement cache needs server-side prepared statements, which
	// PgBouncer 1.18 does not keep in transaction mode: exec mode.
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/acemq?sslmode=disable&default_query_exec_mode=exec", user, port)
}

// Behind PgBouncer in transaction mode the relay's session-level lock and
// settings do not stay with it (the item 5): the relay refuses to
// claim, saying why and what to use. In session mode it works.
func TestARelayBehindTransactionPoolingIsRefused(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		refused bool
	}{{"transaction", true}, {"session", false}} {
		t.Run(tc.mode, func(t *testing.T) {
			ctx := context.Background()
			db, err := sql.Open("pgx", pgbouncer(t, tc.mode))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			s, err := NewStore(db, sqlstore.PostgreSQL)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.EnsureSchema(ctx); err != nil {
				t.Fatal(err)
			}
			c, _ := memConn(t, "orders")
			add(t, s, c, "", "orders", order{"a", 1})
			sw := newRelay(t, c, s).SweepOnce(ctx)
			if tc.refused {
				if !errors.Is(sw.Err, errTransactionPooling) || sw.Claimed != 0 {
					t.Fatalf("sweep behind transaction pooling %+v, want it refused", sw)
				}
				return
			}
			if sw.Err != nil || sw.Published != 1 {
				t.Fatalf("sweep behind session pooling %+v", sw)
			}
		})
	}
}
