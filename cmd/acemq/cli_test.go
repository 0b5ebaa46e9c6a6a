package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
	"github.com/acemq-go/acemq/header"
)

// The tests run the BUILT acemqBinary, as an operator would.
var acemqBinary string

func TestMain(m *testing.M) {
	// A fuzz worker (a re-run of this binary by `go test -fuzz`) runs only
	// the fuzz target; building the command in each would stall fuzzing.
	if slices.Contains(os.Args[1:], "-test.fuzzworker") {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "acemq-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	acemqBinary = filepath.Join(dir, "acemq")
	out, err := exec.Command("go", "build", "-o", acemqBinary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/acemq: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// acemqCmd runs the acemqBinary with stdin and returns what it printed and its
// exit code. ACEMQ_URL is removed from the environment so every test says
// which broker it means.
func acemqCmd(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, acemqBinary, args...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "ACEMQ_URL=") && !strings.HasPrefix(e, "ACEMQ_MANAGEMENT_URL=") && !strings.HasPrefix(e, "ACEMQ_EXAMPLE_SECONDS=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	// The test node's management API, which the commands that read a
	// queue ask what a read does there (a test may still pass its own
	// --management-url).
	if m := os.Getenv("ACEMQ_TEST_MANAGEMENT_URL"); m != "" {
		cmd.Env = append(cmd.Env, "ACEMQ_MANAGEMENT_URL="+m)
	}
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("acemq %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// mustSucceed fails the test unless the command exited 0.
func mustSucceed(t *testing.T, r result, args ...string) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("acemq %s exited %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
}

// run runs the command and requires exit 0.
func run0(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	r := acemqCmd(t, stdin, args...)
	mustSucceed(t, r, args...)
	return r
}

// mustFailWithSentence requires a non-zero exit and exactly one error line
// on stderr, "acemq: …", containing want.
func mustFailWithSentence(t *testing.T, r result, want string, args ...string) {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("acemq %s exited 0, want a failure\nstdout:\n%s", strings.Join(args, " "), r.stdout)
	}
	var errLines []string
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if strings.HasPrefix(l, "acemq: ") {
			errLines = append(errLines, l)
		}
	}
	if len(errLines) != 1 {
		t.Fatalf("acemq %s: want exactly one 'acemq: ' error line on stderr, got:\n%s", strings.Join(args, " "), r.stderr)
	}
	if !strings.Contains(errLines[0], want) {
		t.Fatalf("acemq %s: error %q does not contain %q", strings.Join(args, " "), errLines[0], want)
	}
	if !strings.Contains(errLines[0], ";") && !strings.Contains(errLines[0], "run again") {
		t.Fatalf("acemq %s: error %q does not say what to do", strings.Join(args, " "), errLines[0])
	}
}

// brokerDown is an AMQP URL on a loopback port where nothing listens.
func brokerDown(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "amqp://guest:guest@" + addr + "/"
}

func testManagementURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("ACEMQ_TEST_MANAGEMENT_URL")
	if u == "" {
		if testenv.Required() {
			t.Fatal("ACEMQ_TEST_MANAGEMENT_URL is not set; scripts/rabbitmq.sh start writes it (required under CI=true / ACEMQ_REQUIRE_SERVICES=1)")
		}
		t.Skip("ACEMQ_TEST_MANAGEMENT_URL is not set; `make test` starts a node with the management plugin and sets it")
	}
	return u
}

// libConn connects the test itself to the broker, to set up and check.
func libConn(t *testing.T, url string) *acemq.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func depth(t *testing.T, c *acemq.Conn, q string) int {
	t.Helper()
	info, err := c.QueueInfo(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return info.Messages
}

func deleteQueues(t *testing.T, c *acemq.Conn, qs ...string) {
	t.Cleanup(func() {
		for _, q := range qs {
			_, _ = c.DeleteQueue(context.Background(), q)
		}
	})
}

func TestEveryCommandHasHelpWithAnExampleAndURL(t *testing.T) {
	for _, path := range [][]string{
		{"demo"}, {"topology", "plan"}, {"topology", "apply"}, {"dlq", "list"}, {"dlq", "show"},
		{"dlq", "replay"}, {"dlq", "purge"}, {"publish"}, {"tail"}, {"bench"}, {"load"}, {"health"}, {"console"},
	} {
		r := run0(t, "", append(path, "--help")...)
		if !strings.Contains(r.stdout, "Examples:") || !strings.Contains(r.stdout, "--url") {
			t.Errorf("acemq %s --help lacks an example or --url:\n%s", strings.Join(path, " "), r.stdout)
		}
	}
}

var summaryRow = regexp.MustCompile(`this run\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)`)

func checkDemo(t *testing.T, r result) {
	t.Helper()
	m := summaryRow.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no summary row in the demo's output:\n%s", r.stdout)
	}
	// published, confirmed, consumed, retried, dead-lettered, replayed, lost
	if got := strings.Join(m[1:], " "); got != "3 3 10 3 1 1 0" {
		t.Fatalf("summary = %s, want 3 3 10 3 1 1 0\n%s", got, r.stdout)
	}
	if !strings.Contains(r.stdout, "lost = 0") {
		t.Fatalf("the demo does not say lost = 0:\n%s", r.stdout)
	}
	if r.took > 30*time.Second {
		t.Fatalf("the demo took %v, want under 30s", r.took)
	}
}

func TestDemoOnMemoryAndSQLiteEndsWithLostZero(t *testing.T) {
	checkDemo(t, run0(t, "", "demo"))
}

func TestDemoOnRabbitMQAndPostgreSQLEndsWithLostZero(t *testing.T) {
	url, pg := testenv.AMQPURL(t), testenv.PostgresURL(t)
	checkDemo(t, run0(t, "", "demo", "--url", url, "--db", pg))
}

func TestDemoWithBrokerDownFailsWithOneSentence(t *testing.T) {
	r := acemqCmd(t, "", "demo", "--url", brokerDown(t))
	mustFailWithSentence(t, r, "cannot connect to the broker")
}

func TestDemoWithDatabaseDownFailsWithOneSentence(t *testing.T) {
	addr := strings.TrimPrefix(strings.TrimSuffix(brokerDown(t), "/"), "amqp://guest:guest@")
	r := acemqCmd(t, "", "demo", "--db", "postgres://acemq@"+addr+"/acemq?sslmode=disable&connect_timeout=2")
	mustFailWithSentence(t, r, "cannot open the database")
}

const topologyYAML = `exchanges:
  - name: %[1]s.ex
    type: topic
queues:
  - name: %[1]s.q
    type: %[2]s
    deadLetters: true
    retry: {attempts: 3, initial: 10s, max: 1m}
bindings:
  - queue: %[1]s.q
    exchange: %[1]s.ex
    key: order.created
`

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "topology.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// After apply, the plan only matches, on RabbitMQ 3.10 and 4.0 alike: 4.0
// stores x-queue-type classic on the classic .dlq, .parked and rung queues
// declared without it, and the plan (the broker's own equivalence check)
// does not report that default as a difference.
func TestTopologyPlanApplyPlanOnRabbitMQ(t *testing.T) {
	url := testenv.AMQPURL(t)
	name := testenv.Unique("cli.topo")
	c := libConn(t, url)
	deleteQueues(t, c, name+".q", name+".q.dlq", name+".q.parked", name+".q.retry.10s", name+".q.retry.20s")
	f := writeFile(t, fmt.Sprintf(topologyYAML, name, "quorum"))

	r := run0(t, "", "topology", "plan", "-f", f, "--url", url)
	if !strings.Contains(r.stdout, "queue "+name+".q (quorum") || !strings.Contains(r.stdout, ": would create") {
		t.Fatalf("plan before apply:\n%s", r.stdout)
	}
	run0(t, "", "topology", "apply", "-f", f, "--url", url)
	r = run0(t, "", "topology", "plan", "-f", f, "--url", url)
	if !strings.Contains(r.stdout, "plan: 0 would create, 5 match, 0 differ, 3 unknown") || strings.Contains(r.stdout, ": would create") {
		t.Fatalf("plan after apply should only match:\n%s", r.stdout)
	}
	// The same queue as classic differs: exit 3 and the broker's text.
	r = acemqCmd(t, "", "topology", "plan", "-f", writeFile(t, fmt.Sprintf(topologyYAML, name, "classic")), "--url", url)
	if r.code != 3 || !strings.Contains(r.stdout, ": differs") {
		t.Fatalf("plan of a differing queue: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	mustFailWithSentence(t, r, "differ")
	r = acemqCmd(t, "", "topology", "apply", "-f", writeFile(t, fmt.Sprintf(topologyYAML, name, "classic")), "--url", url)
	mustFailWithSentence(t, r, "refused the topology")
}

func TestTopologyOnMemoryPlansThenApplies(t *testing.T) {
	f := writeFile(t, fmt.Sprintf(topologyYAML, "mem", "quorum"))
	r := run0(t, "", "topology", "plan", "-f", f, "--url", "memory://t")
	if !strings.Contains(r.stdout, "plan: 5 would create, 0 match, 0 differ, 3 unknown") {
		t.Fatalf("plan on a fresh in-process broker:\n%s", r.stdout)
	}
	r = run0(t, "", "topology", "apply", "-f", f, "--url", "memory://t")
	if !strings.Contains(r.stdout, "applied: ") {
		t.Fatalf("apply:\n%s", r.stdout)
	}
}

// The plan says where each queue's retry waits are held: in the quorum
// queue on RabbitMQ 4.3 and later (its delayed retry), on rungs before.
func TestTopologyPlanSaysWhereRetryWaitsAreHeld(t *testing.T) {
	url := testenv.AMQPURL(t)
	name := testenv.Unique("cli.waits")
	c := libConn(t, url)
	_, version := c.Broker()
	f := writeFile(t, fmt.Sprintf("queues:\n  - name: %s\n    deadLetters: true\n    retry: {attempts: 4, step: 10s, max: 30s, waits: where-supported}\n", name))
	r := run0(t, "", "topology", "plan", "-f", f, "--url", url)
	want := "retries of queue " + name + " (linear(4, 10s, 30s).holdWaits(in the queue where supported)): waits on rungs: RabbitMQ " + version + " has no delayed retry"
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err == nil && (major > 4 || major == 4 && minor >= 3) {
		want = "retries of queue " + name + " (linear(4, 10s, 30s).holdWaits(in the queue where supported)): waits in the queue: RabbitMQ " + version + " holds them in the queue (x-delayed-retry-type failed, min 10s, max 30s"
	}
	if !strings.Contains(r.stdout, want) {
		t.Fatalf("plan on RabbitMQ %s lacks %q:\n%s", version, want, r.stdout)
	}
}

func TestTopologyBadFilesFailWithOneSentence(t *testing.T) {
	for name, c := range map[string]struct{ content, want string }{
		"not yaml":                         {"exchanges: [", "not valid YAML"},
		"unknown field":                    {"queues:\n  - name: a\n    typo: 1\n", "not valid YAML"},
		"bad type":                         {"exchanges:\n  - name: a\n    type: fancy\n", "use direct, topic, fanout or headers"},
		"empty":                            {"", "declares nothing"},
		"bad duration":                     {"queues:\n  - name: a\n    retry: {attempts: 2, initial: soon}\n", "not a duration"},
		"bad binding":                      {"queues:\n  - name: a\nbindings:\n  - {queue: a, exchange: nowhere, key: k}\n", "cannot be declared"},
		"bad waits":                        {"queues:\n  - name: a\n    retry: {attempts: 2, delay: 1s, waits: sideways}\n", "use rungs, queue or where-supported"},
		"two schedules":                    {"queues:\n  - name: a\n    retry: {attempts: 2, delay: 1s, step: 1s, max: 2s}\n", "give one of delay (fixed)"},
		"waits in a queue memory:// lacks": {"queues:\n  - name: a\n    retry: {attempts: 3, step: 1s, max: 2s, waits: queue}\n", "memory:// holds no waits inside a queue"},
	} {
		t.Run(name, func(t *testing.T) {
			r := acemqCmd(t, "", "topology", "plan", "-f", writeFile(t, c.content), "--url", "memory://t")
			mustFailWithSentence(t, r, c.want)
		})
	}
	r := acemqCmd(t, "", "topology", "apply", "-f", "/nonexistent/topology.yaml", "--url", "memory://t")
	mustFailWithSentence(t, r, "cannot read the topology file")
	r = acemqCmd(t, "", "topology", "plan", "--url", "memory://t")
	mustFailWithSentence(t, r, "no topology file")
}

// seedDLQ declares q with dead-lettering and puts n set-aside messages in
// q.dlq: the first carries the error "timeout", the rest "bad data".
func seedDLQ(t *testing.T, c *acemq.Conn, q string, n int) []string {
	t.Helper()
	ctx := context.Background()
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{}).DeadLetters(q)); err != nil {
		t.Fatal(err)
	}
	deleteQueues(t, c, q, q+".dlq", q+".parked")
	var ids []string
	for i := 0; i < n; i++ {
		env := acemq.NewEnvelope()
		env.Type = "OrderPlaced"
		env.Attempt = 5
		env.Error = "bad data"
		if i == 0 {
			env.Error = "timeout talking to the warehouse"
		}
		err := c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: q + ".dlq", ContentType: "application/json", MessageID: env.ID,
			Headers: env.WireHeaders(), Body: []byte(fmt.Sprintf(`{"order":"o-%d"}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, env.ID)
	}
	return ids
}

func TestDLQListShowReplayPurgeOnRabbitMQ(t *testing.T) {
	url, mgmt := testenv.AMQPURL(t), testManagementURL(t)
	c := libConn(t, url)
	q := testenv.Unique("cli.dlq")
	ids := seedDLQ(t, c, q, 3)

	r := run0(t, "", "dlq", "list", "--url", url, "--management-url", mgmt, "--json")
	var listed []queueDepth
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil {
		t.Fatalf("dlq list --json: %v\n%s", err, r.stdout)
	}
	found := map[string]int{}
	for _, d := range listed {
		found[d.Name] = d.Messages
	}
	if found[q+".dlq"] != 3 || found[q+".parked"] != 0 {
		t.Fatalf("dlq list: want %s.dlq 3 and .parked 0, got %v", q, listed)
	}
	for n := range found {
		if !isSetAside(n) {
			t.Fatalf("dlq list shows %s, which is not a .dlq or .parked queue", n)
		}
	}

	r = run0(t, "", "dlq", "show", q+".dlq", "-n", "2", "--json", "--url", url)
	var shown []shownMessage
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil {
		t.Fatalf("dlq show --json: %v\n%s", err, r.stdout)
	}
	if len(shown) != 2 || shown[0].ID != ids[0] || shown[0].Error != "timeout talking to the warehouse" || shown[0].Attempt != 5 || !strings.Contains(shown[0].Body, `"o-0"`) {
		t.Fatalf("dlq show: %+v", shown)
	}
	if d := depth(t, c, q+".dlq"); d != 3 {
		t.Fatalf("dlq show removed messages: depth %d, want 3", d)
	}

	r = acemqCmd(t, "", "dlq", "replay", q+".dlq", "--filter", `error ~ "timeout" &&`, "--url", url)
	mustFailWithSentence(t, r, "does not parse")
	if d := depth(t, c, q+".dlq"); d != 3 {
		t.Fatalf("a failed replay moved messages: depth %d", d)
	}

	r = run0(t, "", "dlq", "replay", q+".dlq", "--filter", `error ~ "timeout"`, "--url", url)
	if !strings.Contains(r.stdout, "moved 1, skipped 2 (drained)") {
		t.Fatalf("replay with filter: %s", r.stdout)
	}
	if d := depth(t, c, q); d != 1 {
		t.Fatalf("%s holds %d after replay, want 1", q, d)
	}
	p, err := c.NewPuller(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m, ok, err := p.Pull(context.Background(), q)
	if err != nil || !ok {
		t.Fatalf("pull replayed message: ok=%v err=%v", ok, err)
	}
	if m.Envelope.ID != ids[0] || m.Envelope.Attempt != 1 || m.Envelope.Error != "" || m.Headers[header.ReplayedFrom] != q+".dlq" || headerInt(m.Headers[header.ReplayCount]) != 1 {
		t.Fatalf("replayed message: id %s attempt %d error %q headers %v", m.Envelope.ID, m.Envelope.Attempt, m.Envelope.Error, m.Headers)
	}
	_ = m.Ack()

	r = run0(t, "", "dlq", "replay", q+".dlq", "--limit", "1", "--keep-attempts", "--url", url)
	if !strings.Contains(r.stdout, "moved 1, skipped 0 (limit)") {
		t.Fatalf("replay --limit 1: %s", r.stdout)
	}
	m, ok, err = p.Pull(context.Background(), q)
	if err != nil || !ok || m.Envelope.Attempt != 5 || m.Envelope.Error != "bad data" {
		t.Fatalf("--keep-attempts: ok=%v err=%v attempt=%d error=%q", ok, err, m.Envelope.Attempt, m.Envelope.Error)
	}
	_ = m.Ack()

	r = acemqCmd(t, "", "dlq", "purge", q+".dlq", "--url", url)
	mustFailWithSentence(t, r, "--yes")
	if d := depth(t, c, q+".dlq"); d != 1 {
		t.Fatalf("purge without --yes changed the queue: depth %d, want 1", d)
	}
	r = run0(t, "", "dlq", "purge", q+".dlq", "--yes", "--url", url)
	if !strings.Contains(r.stdout, "purged 1 message(s)") || depth(t, c, q+".dlq") != 0 {
		t.Fatalf("purge --yes: %s", r.stdout)
	}

	mustFailWithSentence(t, acemqCmd(t, "", "dlq", "show", q+".missing.dlq", "--url", url), "does not exist")
	mustFailWithSentence(t, acemqCmd(t, "", "dlq", "replay", q+".missing.dlq", "--url", url), "does not exist")
	mustFailWithSentence(t, acemqCmd(t, "", "dlq", "purge", q, "--yes", "--url", url), "not a dead-letter queue")
	mustFailWithSentence(t, acemqCmd(t, "", "dlq", "list", "--url", url, "--management-url", "http://guest:guest@"+strings.TrimPrefix(strings.TrimSuffix(brokerDown(t), "/"), "amqp://guest:guest@")+"/"), "management API")
}

func TestDLQOnMemorySeesItsOwnEmptyBroker(t *testing.T) {
	r := run0(t, "", "dlq", "list", "--url", "memory://ops")
	if strings.TrimSpace(r.stdout) != "no dead-letter queues" {
		t.Fatalf("dlq list on a fresh in-process broker: %q", r.stdout)
	}
	mustFailWithSentence(t, acemqCmd(t, "", "dlq", "show", "orders.dlq", "--url", "memory://ops"), "does not exist")
	mustFailWithSentence(t, acemqCmd(t, "", "dlq", "replay", "orders", "--url", "memory://ops"), "not a dead-letter queue")
	mustFailWithSentence(t, acemqCmd(t, "", "dlq", "replay", "orders.dlq", "--filter", "attempt >", "--url", "memory://ops"), "does not parse")
	mustFailWithSentence(t, acemqCmd(t, "", "dlq", "show", "--url", "memory://ops"), "exactly one queue name")
}

func TestPublishAndTailOnRabbitMQ(t *testing.T) {
	url := testenv.AMQPURL(t)
	c := libConn(t, url)
	q := testenv.Unique("cli.tail")
	// Classic: tail reads a quorum queue with a delivery limit only with
	// --unsafe-read (TestReadsNeverCountTowardADeliveryLimit).
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	deleteQueues(t, c, q, q+".dlq", q+".parked")

	r := run0(t, "{\"id\":1}\nplain text\n\n{\"id\":3}\n", "publish", "--queue", q, "--type", "Note", "--header", "tenant=acme", "--url", url)
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		id, ok := strings.CutPrefix(l, "confirmed ")
		if !ok || len(id) != 36 {
			t.Fatalf("publish line %q is not 'confirmed <uuid>'", l)
		}
		ids = append(ids, id)
	}
	if len(ids) != 3 || depth(t, c, q) != 3 {
		t.Fatalf("published %d ids, queue depth %d; want 3 and 3", len(ids), depth(t, c, q))
	}

	r = run0(t, "", "tail", q, "-n", "3", "--url", url)
	lines := parseTail(t, r.stdout)
	if len(lines) != 3 || lines[0].ID != ids[0] || lines[1].Body != "plain text" || lines[2].Type != "Note" || lines[0].Settled != "held" {
		t.Fatalf("tail: %+v", lines)
	}
	// tail hands the messages back (nack, requeue) as it exits; the
	// broker's queue has them back a moment after the channel closes.
	for deadline := time.Now().Add(5 * time.Second); depth(t, c, q) != 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("tail without --ack removed messages: depth %d 5s after it exited; want 3", depth(t, c, q))
		}
	}
	r = run0(t, "", "tail", q, "--ack", "-n", "3", "--url", url)
	if lines := parseTail(t, r.stdout); len(lines) != 3 || lines[2].Settled != "acked" {
		t.Fatalf("tail --ack: %+v", lines)
	}
	if d := depth(t, c, q); d != 0 {
		t.Fatalf("tail --ack left %d messages", d)
	}

	mustFailWithSentence(t, acemqCmd(t, "", "publish", "--exchange", "", "--key", q+".nobody", "--body", "x", "--url", url), "no queue is bound")
	mustFailWithSentence(t, acemqCmd(t, "", "tail", q+".missing", "--url", url), "does not exist")
	mustFailWithSentence(t, acemqCmd(t, "", "publish", "--queue", q, "--codec", "json", "--body", "{nope", "--url", url), "not valid JSON")
	if d := depth(t, c, q); d != 0 {
		t.Fatalf("failed publishes left %d messages", d)
	}
}

func parseTail(t *testing.T, out string) []tailLine {
	t.Helper()
	var lines []tailLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var tl tailLine
		if err := json.Unmarshal([]byte(l), &tl); err != nil {
			t.Fatalf("tail line %q: %v", l, err)
		}
		lines = append(lines, tl)
	}
	return lines
}

func TestPublishAndTailOnMemoryFailHonestlyInAFreshProcess(t *testing.T) {
	// A separate process has its own empty in-process broker: no queue
	// to route to and none to read.
	mustFailWithSentence(t, acemqCmd(t, "", "publish", "--queue", "orders", "--body", "{}", "--url", "memory://ops"), "no queue is bound")
	mustFailWithSentence(t, acemqCmd(t, "", "tail", "orders", "--url", "memory://ops"), "does not exist")
	mustFailWithSentence(t, acemqCmd(t, "", "publish", "--url", "memory://ops"), "nowhere to publish")
	mustFailWithSentence(t, acemqCmd(t, "", "tail", "orders", "--ack", "--requeue", "--url", "memory://ops"), "pick one")
}

func benchOn(t *testing.T, url string, extra ...string) benchResult {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bench.json")
	r := run0(t, "", append([]string{"bench", "--url", url, "--out", out}, extra...)...)
	if !strings.Contains(r.stdout, "p99.9") {
		t.Fatalf("bench table lacks percentiles:\n%s", r.stdout)
	}
	// Not a terminal: progress comes as plain lines on stderr, the last
	// one at the total.
	if !regexp.MustCompile(`(?m)^bench: (\d+)/\d+ \(`).MatchString(r.stderr) || strings.Contains(r.stderr, "\r") {
		t.Fatalf("bench progress on a non-terminal:\n%q", r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res benchResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("bench JSON: %v\n%s", err, b)
	}
	if res.Consumed != res.Confirmed || res.Lost != 0 || res.Confirmed == 0 {
		t.Fatalf("bench lost messages: %+v", res)
	}
	if !(res.P50Ms <= res.P90Ms && res.P90Ms <= res.P99Ms && res.P99Ms <= res.P999Ms && res.P999Ms <= res.MaxMs) {
		t.Fatalf("percentiles out of order: %+v", res)
	}
	return res
}

func TestBenchUnthrottledAndOpenLoop(t *testing.T) {
	urls := map[string]string{"memory": "memory://bench"}
	if u := os.Getenv("ACEMQ_TEST_AMQP_URL"); u != "" || testenv.Required() {
		urls["rabbitmq"] = testenv.AMQPURL(t)
	}
	for name, url := range urls {
		t.Run(name, func(t *testing.T) {
			res := benchOn(t, url, "--count", "2000", "--size", "128", "--window", "50")
			if res.Mode != "unthrottled" || res.Confirmed != 2000 || res.LatencyFrom != "send" {
				t.Fatalf("unthrottled: %+v", res)
			}
			res = benchOn(t, url, "--rate", "1000", "--for", "1s", "--queue-type", "classic")
			if res.Mode != "open-loop" || res.Confirmed != 1000 || res.LatencyFrom != "intended send time" || res.Seconds < 0.99 {
				t.Fatalf("open-loop: %+v", res)
			}
		})
	}
	mustFailWithSentence(t, acemqCmd(t, "", "bench", "--url", "memory://b", "--size", "4"), "--size")
	mustFailWithSentence(t, acemqCmd(t, "", "bench", "--url", "memory://b", "--queue-type", "lazy"), "quorum or classic")
}

var loadFields = []string{"at", "elapsedMs", "blocked", "published", "confirmed", "consumed", "failed", "publishRate", "consumeRate", "refused"}

func TestLoadPrintsTheContractLineEverySecond(t *testing.T) {
	urls := map[string]string{"memory": "memory://load"}
	if u := os.Getenv("ACEMQ_TEST_AMQP_URL"); u != "" || testenv.Required() {
		urls["rabbitmq"] = testenv.AMQPURL(t)
	}
	for name, url := range urls {
		t.Run(name, func(t *testing.T) {
			q := testenv.Unique("cli.load")
			if name == "rabbitmq" {
				deleteQueues(t, libConn(t, url), q, q+".dlq", q+".parked")
			}
			r := run0(t, "", "load", "--url", url, "--queue", q, "--rate", "200", "--interval", "250ms", "--for", "1s")
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			// Start-up (connect, declare) eats into the 1s, so count on at
			// least one interval line and the final one.
			if len(lines) < 2 {
				t.Fatalf("want at least 2 sample lines (an interval and the final one), got:\n%s", r.stdout)
			}
			var last map[string]any
			for _, l := range lines {
				pos := -1
				for _, f := range loadFields {
					i := strings.Index(l, `"`+f+`":`)
					if i <= pos {
						t.Fatalf("field %s missing or out of order in %s", f, l)
					}
					pos = i
				}
				if err := json.Unmarshal([]byte(l), &last); err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
			}
			if last["published"].(float64) < 50 || last["failed"].(float64) != 0 || last["confirmed"] != last["consumed"] {
				t.Fatalf("final line: %v", last)
			}
			if _, err := time.Parse("2006-01-02T15:04:05.000Z", last["at"].(string)); err != nil {
				t.Fatalf("at %v is not RFC 3339 UTC with milliseconds", last["at"])
			}
		})
	}
	mustFailWithSentence(t, acemqCmd(t, "", "load", "--url", "memory://l", "--rate", "0"), "--rate")
}

func TestHealthLineAndExitCode(t *testing.T) {
	r := run0(t, "", "health", "--url", "memory://h")
	if !strings.HasPrefix(r.stdout, "UP transport=memory open=true blocked=false") || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("health on memory: %q", r.stdout)
	}
	if url := os.Getenv("ACEMQ_TEST_AMQP_URL"); url != "" || testenv.Required() {
		r = run0(t, "", "health", "--url", testenv.AMQPURL(t))
		if !strings.HasPrefix(r.stdout, "UP transport=rabbitmq open=true") {
			t.Fatalf("health on RabbitMQ: %q", r.stdout)
		}
	}
	r = acemqCmd(t, "", "health", "--url", brokerDown(t))
	if r.code != 1 || strings.TrimSpace(r.stdout) != "DOWN" {
		t.Fatalf("health with the broker down: exit %d, %q", r.code, r.stdout)
	}
	mustFailWithSentence(t, r, "cannot connect")

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		if req.URL.Path == "/down" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, `{"status":"DOWN","components":{"acemq":{"status":"DOWN","details":{"transport":"rabbitmq","open":false,"blocked":false,"inFlight":0,"detail":"the connection has been closed"}}}}`)
			return
		}
		fmt.Fprintln(w, `{"status":"DEGRADED","components":{"acemq":{"status":"DEGRADED","details":{"transport":"rabbitmq","open":true,"blocked":false,"inFlight":2,"detail":"these consumers have stopped reading: orders"}}}}`)
	}))
	defer srv.Close()
	r = acemqCmd(t, "", "health", "--actuator", srv.URL+"/acemq-health")
	if r.code != 2 || !strings.HasPrefix(r.stdout, "DEGRADED transport=rabbitmq open=true blocked=false inFlight=2") {
		t.Fatalf("DEGRADED actuator: exit %d, %q", r.code, r.stdout)
	}
	r = acemqCmd(t, "", "health", "--actuator", srv.URL+"/down")
	if r.code != 1 || !strings.Contains(r.stdout, `DOWN transport=rabbitmq open=false`) {
		t.Fatalf("DOWN actuator: exit %d, %q", r.code, r.stdout)
	}
}

func TestEveryBrokerCommandSaysWhatToDoWhenTheBrokerIsDown(t *testing.T) {
	down := brokerDown(t)
	topo := writeFile(t, fmt.Sprintf(topologyYAML, "down", "quorum"))
	for _, args := range [][]string{
		{"topology", "plan", "-f", topo}, {"topology", "apply", "-f", topo},
		{"dlq", "show", "orders.dlq"}, {"dlq", "replay", "orders.dlq"}, {"dlq", "purge", "orders.dlq", "--yes"},
		{"publish", "--queue", "orders", "--body", "{}"}, {"tail", "orders"},
		{"bench", "--count", "10"}, {"load", "--for", "1s"}, {"health"},
	} {
		t.Run(strings.Join(args[:min(2, len(args))], " "), func(t *testing.T) {
			mustFailWithSentence(t, acemqCmd(t, "", append(args, "--url", down)...), "cannot connect to the broker")
		})
	}
}

func TestCommandsWithoutAURLSayHowToGiveOne(t *testing.T) {
	for _, args := range [][]string{{"dlq", "list"}, {"dlq", "show", "q.dlq"}, {"publish", "--queue", "q", "--body", "x"}, {"health"}} {
		mustFailWithSentence(t, acemqCmd(t, "", args...), "no broker URL")
	}
}

func TestUnknownCommandsFlagsAndArgumentsSayToRunHelp(t *testing.T) {
	mustFailWithSentence(t, acemqCmd(t, "", "tail", "q", "--bogus"), "--help")
	mustFailWithSentence(t, acemqCmd(t, "", "bogus"), "acemq --help")
	mustFailWithSentence(t, acemqCmd(t, "", "topology", "plan", "extra"), "acemq --help")
}

func TestReplayWarnsWhenAnIDIsInTheQueueTwice(t *testing.T) {
	url := testenv.AMQPURL(t)
	c := libConn(t, url)
	q := testenv.Unique("cli.dup")
	ids := seedDLQ(t, c, q, 2)
	// A second copy of the first message, as an at-least-once hop can leave.
	env := acemq.NewEnvelope()
	env.ID = ids[0]
	if err := c.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: q + ".dlq", ContentType: "application/json", MessageID: env.ID,
		Headers: env.WireHeaders(), Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	r := run0(t, "", "dlq", "show", q+".dlq", "-n", "3", "--url", url)
	if strings.Count(r.stdout, "duplicate:") != 1 {
		t.Fatalf("dlq show should mark the second copy as a duplicate:\n%s", r.stdout)
	}
	r = run0(t, "", "dlq", "replay", q+".dlq", "--url", url)
	if !strings.Contains(r.stderr, "warning: 1 message id(s) appear more than once in "+q+".dlq (e.g. "+ids[0]+")") {
		t.Fatalf("replay did not warn about the duplicate id:\n%s", r.stderr)
	}
	if !strings.Contains(r.stdout, "moved 3, skipped 0 (drained)") || depth(t, c, q) != 3 {
		t.Fatalf("replay: %s (queue depth %d, want 3)", r.stdout, depth(t, c, q))
	}
}

func TestBenchDrawsABarOnATerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("util-linux's script is not installed, so no terminal can be faked; apt-get install bsdutils")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// script runs the command on a pseudo-terminal.
	out, err := exec.CommandContext(ctx, script, "-qec", acemqBinary+" bench --url memory://tty --rate 2000 --for 1500ms --out ''", "/dev/null").CombinedOutput()
	if err != nil {
		t.Fatalf("bench on a terminal: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "\rbench [") || !regexp.MustCompile(`\[#{30}\] 3000/3000`).Match(out) {
		t.Fatalf("no redrawn progress bar on a terminal:\n%q", out)
	}
}

func TestLoadUntilInterruptedEndsWithAFinalLineAndExitZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, acemqBinary, "load", "--url", "memory://sig", "--rate", "100", "--interval", "200ms", "--for", "0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var got strings.Builder
	for !strings.Contains(got.String(), "\n") { // the first sample line
		n, err := stdout.Read(buf)
		if err != nil {
			t.Fatalf("load ended before its first line: %v (%q)", err, got.String())
		}
		got.Write(buf[:n])
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stdout)
	got.Write(rest)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("load after Ctrl-C: %v\n%s", err, got.String())
	}
	lines := strings.Split(strings.TrimSpace(got.String()), "\n")
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || len(lines) < 2 {
		t.Fatalf("want sample lines ending with a final one, got %q (%v)", got.String(), err)
	}
}

func TestTailWaitsForAMessagePublishedAfterItStarted(t *testing.T) {
	url := testenv.AMQPURL(t)
	c := libConn(t, url)
	q := testenv.Unique("cli.tailwait")
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{})); err != nil {
		t.Fatal(err)
	}
	deleteQueues(t, c, q)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, acemqBinary, "tail", q, "--ack", "-n", "1", "--for", "30s", "--url", url)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sent, err := c.Publish(ctx, "", q, map[string]string{"late": "yes"}, acemq.SendOptions{Mandatory: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tail: %v\n%s", err, out.String())
	}
	if lines := parseTail(t, out.String()); len(lines) != 1 || lines[0].ID != sent.Envelope.ID || lines[0].Settled != "acked" {
		t.Fatalf("tail printed %q, want the late message %s, acked", out.String(), sent.Envelope.ID)
	}
	if d := depth(t, c, q); d != 0 {
		t.Fatalf("queue holds %d after tail --ack", d)
	}
}

// acemq demo --console keeps the in-process broker up with dead letters
// and serves the console, with its token, until Ctrl-C.
func TestDemoConsoleServesTheDeadLettersUntilInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, acemqBinary, "demo", "--console", "--listen", "127.0.0.1:0")
	cmd.Dir = t.TempDir()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	consoleLine := regexp.MustCompile(`console: (http://127\.0\.0\.1:\d+)/sign-in#code=[0-9a-f]{32}\ntoken: ([0-9a-f]{32})\n`)
	buf := make([]byte, 4096)
	var got strings.Builder
	var m []string
	for m == nil {
		n, err := stdout.Read(buf)
		if err != nil {
			t.Fatalf("the demo ended before serving the console: %v\n%s", err, got.String())
		}
		got.Write(buf[:n])
		m = consoleLine.FindStringSubmatch(got.String())
	}
	req, _ := http.NewRequest(http.MethodGet, m[1]+"/api/overview", nil)
	req.Header.Set("Authorization", "Bearer "+m[2])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ov struct {
		Queues []struct {
			Name  string `json:"name"`
			Depth int    `json:"depth"`
		} `json:"queues"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ov)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, q := range ov.Queues {
		if q.Name == "demo.shipping.dlq" && q.Depth == 12 {
			found = true
		}
	}
	if !found {
		t.Fatalf("the console does not show demo.shipping.dlq with 12 dead letters: %+v", ov)
	}
	if resp, err := http.Get(m[1] + "/"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("demo --console after Ctrl-C: %v", err)
	}
}
