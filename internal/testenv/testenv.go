// Package testenv finds the real parts tests run against: the family's
// fixtures in ../shared/fixtures, a RabbitMQ node, a PostgreSQL server and
// a MariaDB server started by scripts/.
//
// Outside CI a missing part skips the test with a sentence saying what is
// missing and how to get it. Under CI=true, or with ACEMQ_REQUIRE_SERVICES=1
// (which `make test` sets), a missing part fails the test instead, so a
// green `make test` never hides a skipped broker test.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Required reports whether missing services and fixtures must fail tests.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("ACEMQ_REQUIRE_SERVICES") == "1"
}

func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s (required under CI=true / ACEMQ_REQUIRE_SERVICES=1)", msg)
	}
	t.Skip(msg)
}

// RepoRoot returns the directory holding the module's go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/acemq-go/acemq\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("testenv: cannot find the acemq module root above the working directory")
		}
		dir = parent
	}
}

// Fixture returns the bytes of ../shared/fixtures/name, read in place.
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	path := filepath.Join(RepoRoot(t), "..", "shared", "fixtures", name)
	if dir := os.Getenv("ACEMQ_FIXTURES_DIR"); dir != "" {
		path = filepath.Join(dir, name)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		missing(t, "the family fixture %s is not readable (%v); check out shared/ beside this repository", path, err)
	}
	return b
}

// service returns the environment variable name, or reports the missing
// service (skip outside CI, fail under it) saying what it stops and how to
// get it.
func service(t testing.TB, name, consequence string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		missing(t, "%s is not set, so %s", name, consequence)
	}
	return v
}

// AMQPURL returns the URL of the test RabbitMQ node (ACEMQ_TEST_AMQP_URL).
func AMQPURL(t testing.TB) string {
	t.Helper()
	return service(t, "ACEMQ_TEST_AMQP_URL", "this RabbitMQ test cannot run; `make test` starts a private node and sets it")
}

// RawChannel opens a plain amqp091-go connection to url and a channel on
// it, for a test that must put on the wire what AceMQ would not send (or
// read what it sent without AceMQ); the connection closes when the test
// ends.
func RawChannel(t testing.TB, url string) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// RabbitMajor returns the major version of the test RabbitMQ node (3 for
// Debian 12's 3.10, 4 for Debian 13's 4.0), read from the server properties
// of a fresh connection, for the few assertions on what differs between
// them (docs/support.md lists each). It fails the test when the node does
// not say its version.
func RabbitMajor(t testing.TB) int {
	t.Helper()
	major, _ := RabbitVersion(t)
	return major
}

// RabbitVersion returns the major and minor version of the test RabbitMQ
// node (3, 10 for Debian 12's 3.10.8; 4, 3 for 4.3.6), for the assertions
// on what differs between versions (docs/support.md lists each). It fails
// the test when the node does not say its version.
func RabbitVersion(t testing.TB) (major, minor int) {
	t.Helper()
	conn, err := amqp.Dial(AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	v, _ := conn.Properties["version"].(string)
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil || major == 0 {
		t.Fatalf("testenv: the RabbitMQ node says its version is %q; want a version such as 3.10.8", v)
	}
	return major, minor
}

// RabbitCountsNacks reports whether the test node's quorum queues count a
// basic.nack with requeue toward x-delivery-count: RabbitMQ before 4.3.
func RabbitCountsNacks(t testing.TB) bool {
	t.Helper()
	major, minor := RabbitVersion(t)
	return major < 4 || major == 4 && minor < 3
}

// ManagementURL returns the management HTTP API URL of the test RabbitMQ
// node, credentials included (ACEMQ_TEST_MANAGEMENT_URL).
func ManagementURL(t testing.TB) string {
	t.Helper()
	return service(t, "ACEMQ_TEST_MANAGEMENT_URL", "this test cannot close connections through the management API; `make test` starts a node with the management plugin and sets it")
}

// AMQPSURL returns the amqps:// URL of the test RabbitMQ node's TLS
// listener (ACEMQ_TEST_AMQPS_URL). Its certificate is signed by the CA at
// TLSCAFile and names localhost and 127.0.0.1.
func AMQPSURL(t testing.TB) string {
	t.Helper()
	return service(t, "ACEMQ_TEST_AMQPS_URL", "this TLS test cannot run; `make test` starts a private node with a TLS listener and sets it")
}

// TLSCAFile returns the path of the PEM file holding the throwaway CA that
// signed the test node's TLS certificate (ACEMQ_TEST_TLS_CA).
func TLSCAFile(t testing.TB) string {
	t.Helper()
	return service(t, "ACEMQ_TEST_TLS_CA", "this TLS test cannot run; `make test` starts a private node with a TLS listener and sets it")
}

// PostgresURL returns the URL of the test PostgreSQL server
// (ACEMQ_TEST_POSTGRES_URL).
func PostgresURL(t testing.TB) string {
	t.Helper()
	return service(t, "ACEMQ_TEST_POSTGRES_URL", "this PostgreSQL test cannot run; `make test` starts a private cluster and sets it")
}

// MySQLDSN returns the go-sql-driver/mysql DSN of the test MariaDB server
// (ACEMQ_TEST_MYSQL_DSN), which scripts/mariadb.sh starts for the MySQL
// dialect.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	return service(t, "ACEMQ_TEST_MYSQL_DSN", "this MySQL test cannot run; `make test` starts a private MariaDB server and sets it")
}

// RequireRabbitCtl fails or skips the test, as a missing service does,
// unless ACEMQ_TEST_RABBITMQCTL names a command. It does not run it: each
// rabbitmqctl call boots an Erlang VM (about a second on an idle machine,
// far more on a loaded one), too much to spend on a probe.
func RequireRabbitCtl(t testing.TB) {
	t.Helper()
	service(t, "ACEMQ_TEST_RABBITMQCTL", "this test cannot control the broker; `make test` sets it")
}

// RabbitCtl runs rabbitmqctl against the test node through the command
// named by ACEMQ_TEST_RABBITMQCTL (scripts/rabbitmq.sh writes one) and
// returns its combined output. It fails the test on error.
func RabbitCtl(t testing.TB, args ...string) string {
	t.Helper()
	ctl := os.Getenv("ACEMQ_TEST_RABBITMQCTL")
	if ctl == "" {
		missing(t, "ACEMQ_TEST_RABBITMQCTL is not set, so this test cannot control the broker; `make test` sets it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for try := 1; ; try++ {
		out, err := exec.CommandContext(ctx, ctl, args...).CombinedOutput()
		if err == nil {
			return string(out)
		}
		// rabbitmqctl's close_* commands list the connections and then
		// ask each to close: one that ends between the two (a client
		// closing or reconnecting at that moment) fails the command with
		// the connection process's exit ({:normal, ...} or :noproc),
		// although nothing is left to close. Run it again: the next
		// listing no longer holds the ended connection.
		if try < 3 && len(args) > 0 && strings.HasPrefix(args[0], "close_") && closedMeanwhile(string(out)) {
			continue
		}
		t.Fatalf("testenv: %s %s: %v\n%s", ctl, strings.Join(args, " "), err, out)
	}
}

// closedMeanwhile reports whether a failed rabbitmqctl close command's
// output says the connection it asked to close had already ended.
func closedMeanwhile(out string) bool {
	if !strings.Contains(out, "{:gen_server, :call,") {
		return false
	}
	for _, exit := range []string{"{:normal, {:gen_server", "{:noproc, {:gen_server", "{{:shutdown, "} {
		if strings.Contains(out, exit) {
			return true
		}
	}
	return false
}

// Unique returns prefix plus a suffix unique to this test run, for queue and
// exchange names on a shared broker.
func Unique(prefix string) string {
	return fmt.Sprintf("%s.%d.%d", prefix, os.Getpid(), time.Now().UnixNano()%1_000_000_000)
}

// Chromium returns the path of the headless browser the console's
// browser tests drive (ACEMQ_TEST_CHROMIUM, which scripts/chromium.sh
// writes after installing Debian's chromium).
func Chromium(t testing.TB) string {
	t.Helper()
	return service(t, "ACEMQ_TEST_CHROMIUM", "this browser test cannot run; `make test` installs Debian's chromium (scripts/chromium.sh) and sets it")
}
