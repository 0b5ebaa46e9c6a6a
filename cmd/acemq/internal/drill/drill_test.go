package drill

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
	"go.uber.org/goleak"
)

// childEnv marks a re-executed test binary as the crash drill's child.
const childEnv = "ACEMQ_DRILL_TEST_CHILD"

// TestMain runs the crash drill's child when the drill re-executes this
// test binary, and otherwise the tests, failing the package when a
// goroutine outlives them.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(ChildMain(context.Background(), os.Args[1:], os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// testEnv is the private node `make test` starts.
func testEnv(t *testing.T) Env {
	t.Helper()
	env := Env{URL: testenv.AMQPURL(t)}
	env.Management = os.Getenv("ACEMQ_TEST_MANAGEMENT_URL")
	if ctl := os.Getenv("ACEMQ_TEST_RABBITMQCTL"); ctl != "" {
		env.Ctl = strings.Fields(ctl)
	}
	if testing.Verbose() {
		env.Progress = os.Stderr
	}
	return env
}

func needCtl(t *testing.T, env Env) {
	t.Helper()
	if len(env.Ctl) == 0 {
		testenv.RequireRabbitCtl(t) // fails or skips, saying what is missing
	}
}

// childCommand re-executes this test binary as the child.
func childCommand(t *testing.T) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(childEnv, "1")
	return []string{exe}
}

func check(t *testing.T, r *Result) {
	t.Helper()
	t.Log(r.Line())
	if !r.OK() {
		t.Fatal(r.Line())
	}
	if !strings.HasPrefix(r.Line(), "drill "+r.Drill+": PASS ") {
		t.Fatalf("verdict line %q does not start with the drill's name and PASS", r.Line())
	}
}

func TestCrashPublishLosesNoConfirmedMessage(t *testing.T) {
	env := testEnv(t)
	r := CrashPublish(context.Background(), env, CrashOptions{Child: childCommand(t), Kills: 3, MaxLife: 300 * time.Millisecond, Dir: t.TempDir()})
	check(t, r)
	if r.Get("kills") != "3" || r.Get("confirmed-missing") != "0" || r.Get("confirmed") == "0" {
		t.Fatalf("numbers: %s", r.Line())
	}
}

func TestCrashConsumeLosesNothingAndKillsBeforeTheAckRedeliver(t *testing.T) {
	env := testEnv(t)
	r := CrashConsume(context.Background(), env, CrashOptions{Child: childCommand(t), Kills: 4, Messages: 200, MaxLife: 300 * time.Millisecond, Dir: t.TempDir()})
	check(t, r)
	if r.Get("kills-before-ack") != "2" || r.Get("missing") != "0" || r.Get("handled-again-or-requeued") == "0" {
		t.Fatalf("numbers: %s", r.Line())
	}
}

func TestCrashOutboxPublishesEveryCommittedRecord(t *testing.T) {
	env := testEnv(t)
	db := testenv.PostgresURL(t)
	r := CrashOutbox(context.Background(), env, db, CrashOptions{Child: childCommand(t), Kills: 2, MaxLife: 300 * time.Millisecond, Dir: t.TempDir()})
	check(t, r)
	if r.Get("committed-missing") != "0" || r.Get("relay-kills") == "0" || r.Get("committed") == "0" {
		t.Fatalf("numbers: %s", r.Line())
	}
}

func TestRestartLosesNothingAndResumes(t *testing.T) {
	env := testEnv(t)
	needCtl(t, env)
	r := Restart(context.Background(), env, RestartOptions{Cycles: 1, Down: 100 * time.Millisecond, QueueTypes: []acemq.QueueType{acemq.Quorum}})
	check(t, r)
	if r.Get("quorum.lost") != "0" || r.Get("quorum.publish-gap") == "none" || r.Get("quorum.plain-client-gap") == "none" {
		t.Fatalf("numbers: %s", r.Line())
	}
}

func TestAlarmPausesWithTheReasonAndResumes(t *testing.T) {
	env := testEnv(t)
	needCtl(t, env)
	r := Alarm(context.Background(), env, AlarmOptions{Hold: 300 * time.Millisecond, SendTimeout: time.Second})
	check(t, r)
	if r.Get("blocked-reason") != `"low on memory"` || r.Get("lost") != "0" || r.Get("paused") == "0" {
		t.Fatalf("numbers: %s", r.Line())
	}
}

// The stall drill's short run: the node's process stopped twice for a few
// seconds (SIGSTOP, then SIGCONT), 4 publishers of 8 MiB messages under a
// 2 s deadline, then 8 Sends without a deadline blocked when Close (1 s)
// is called. Every Send within its deadline, the Conn recovering, Close
// within its context. The slack is 3 s: on a quiet machine Close returns
// 26 ms past its 1 s context, but a rehearsal under -race with the two
// cores ten times oversubscribed saw it return 1.87 s past (the longest
// Send 1.04 s past, the same stall). A Close that waited for the stopped
// broker would not return at all: the broker resumes only after the
// drill has judged Close.
func TestStallBoundsEverySendAndCloseAndTheConnRecovers(t *testing.T) {
	env := testEnv(t)
	needCtl(t, env)
	r := Stall(context.Background(), env, StallOptions{Publishers: 4, Unbounded: 8, StopAfter: time.Second,
		Hold: 3 * time.Second, CloseAfter: 2 * time.Second, CloseTimeout: time.Second, Slack: 3 * time.Second})
	check(t, r)
	if r.Get("recovered") == "" || r.Get("blocked-at-close") == "0" || r.Get("confirmed") == "0" {
		t.Fatalf("numbers: %s", r.Line())
	}
}

func TestSoakStaysFlatAcrossForcedReconnects(t *testing.T) {
	env := testEnv(t)
	needCtl(t, env)
	r := Soak(context.Background(), env, SoakOptions{Reconnects: 3, WarmUp: 1, Every: time.Millisecond})
	t.Log(r.Line())
	// Three reconnects are too few to judge memory; the short run checks
	// that the soak's machinery works and nothing confirmed is lost.
	if r.Get("lost") != "0" || r.Get("reconnects") != "3" || r.Get("confirmed") == "0" {
		t.Fatalf("numbers: %s", r.Line())
	}
	for _, p := range r.Problems {
		if !strings.HasPrefix(p, "memory is not flat") {
			t.Fatal(r.Line())
		}
	}
}

func TestHostileInputLandsWhereTheContractSays(t *testing.T) {
	env := testEnv(t)
	r := Hostile(context.Background(), env)
	check(t, r)
	if r.Get("misplaced") != "0" || r.Get("dlq") == "0" || r.Get("parked") == "0" || r.Get("handled") == "0" {
		t.Fatalf("numbers: %s", r.Line())
	}
}

func TestVerdictLineNamesEveryNumberAndEveryProblem(t *testing.T) {
	r := newResult("x")
	r.Set("a", 1)
	r.Set("b", "2ms")
	r.Set("a", 3)
	r.Took = 1500 * time.Millisecond
	if got, want := r.Line(), "drill x: PASS a=3 b=2ms took=1.5s"; got != want {
		t.Fatalf("line %q, want %q", got, want)
	}
	r.Failf("one")
	r.Failf("two %d", 2)
	if got, want := r.Line(), "drill x: FAIL a=3 b=2ms took=1.5s — one; two 2"; got != want {
		t.Fatalf("line %q, want %q", got, want)
	}
}

func TestBitsCountWhatIsMissing(t *testing.T) {
	a, b := newBits(200), newBits(200)
	for _, i := range []int{0, 63, 64, 199, 500} {
		a.set(i)
	}
	b.set(63)
	if a.count() != 4 || a.missingFrom(b) != 3 || b.missingFrom(a) != 0 {
		t.Fatalf("count %d missing %d/%d", a.count(), a.missingFrom(b), b.missingFrom(a))
	}
}
