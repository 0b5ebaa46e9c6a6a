package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/safetext"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
	"github.com/acemq-go/acemq/saga"
	"github.com/acemq-go/acemq/sqlstore"
	"github.com/acemq-go/acemq/transport/memory"
)

// hostileText is what a publisher can put in a type, a header, a reason or
// a body to act on an operator's terminal, in valid UTF-8: clear the
// screen, write the clipboard (OSC 52), overwrite the line (CR), a C1 CSI,
// a right-to-left override and DEL. hostile adds invalid UTF-8: a C1 CSI
// as a raw byte, then 0xff 0xfe. (The envelope's fields must be UTF-8 to be
// read at all, contract §1.4, so they carry hostileText.)
const (
	hostileText = "a\x1b[2Jb\x1b]52;c;aGk=\x07c\rd\u009b31mf\u202eg\x7fh"
	hostile     = hostileText + "\x9be\xff\xfei"
)

// safeOnATerminal fails the test when out holds a byte the safetext rule
// escapes (C0 but newline and tab, DEL, C1, bidi controls, line
// separators, invalid UTF-8).
func safeOnATerminal(t *testing.T, what, out string) {
	t.Helper()
	for i, l := range strings.Split(strings.ReplaceAll(out, "\t", " "), "\n") {
		if safetext.NeedsEscape(l) {
			t.Fatalf("%s: line %d reaches the terminal raw: %q", what, i+1, l)
		}
	}
}

// decoded is hostile as encoding/json reads it back: each invalid byte a
// U+FFFD, everything else exact.
func decoded(s string) string { return string([]rune(s)) }

// onATerminal runs the acemqBinary on a pseudo-terminal (util-linux's
// script) and returns everything the terminal received, and the exit code.
func onATerminal(t *testing.T, args ...string) (string, int) {
	t.Helper()
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("util-linux's script is not installed, so no terminal can be faked; apt-get install bsdutils")
	}
	quoted := []string{acemqBinary}
	for _, a := range args {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "-qec", strings.Join(quoted, " "), "/dev/null")
	cmd.Env = os.Environ()
	if m := os.Getenv("ACEMQ_TEST_MANAGEMENT_URL"); m != "" {
		cmd.Env = append(cmd.Env, "ACEMQ_MANAGEMENT_URL="+m) // as acemqCmd
	}
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("acemq %s on a terminal: %v\n%q", strings.Join(args, " "), err, out)
	}
	return string(out), code
}

// publishHostile puts one message into queue whose id, type, reason and
// correlation id carry hostileText, one header's name and value hostile,
// and whose text body is body.
func publishHostile(t *testing.T, c *acemq.Conn, queue, id, body string) {
	t.Helper()
	env := acemq.NewEnvelope()
	env.ID, env.Type, env.Error, env.CorrelationID = id, "Order"+hostileText, "reason "+hostileText, "corr"+hostileText
	env.Attempt = 3
	h := env.WireHeaders()
	h["x-note"+hostile] = "value " + hostile
	err := c.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: queue, ContentType: "text/plain", MessageID: id, Headers: h, Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
}

// rawRefusedOnATerminal checks that args with --raw are refused on a
// terminal, writing nothing hostile, and that --raw=force writes the
// body's exact bytes there.
func rawRefusedOnATerminal(t *testing.T, args ...string) {
	t.Helper()
	out, code := onATerminal(t, append(args, "--raw")...)
	if code == 0 || !strings.Contains(out, "stdout is a terminal") || !strings.Contains(out, "--raw=force") {
		t.Fatalf("--raw on a terminal: exit %d, want a refusal naming --raw=force:\n%q", code, out)
	}
	// The terminal's line discipline writes each newline as CR LF.
	safeOnATerminal(t, "--raw refused on a terminal", strings.ReplaceAll(out, "\r\n", "\n"))
	out, code = onATerminal(t, append(args, "--raw=force")...)
	if code != 0 || !strings.Contains(out, "\x1b[2J") || !strings.Contains(out, "\x1b]52;c;aGk=\x07") {
		t.Fatalf("--raw=force on a terminal: exit %d, want the raw bytes:\n%q", code, out)
	}
}

func TestDLQShowEscapesWhatAPublisherChoseAndRawIsExact(t *testing.T) {
	url := testenv.AMQPURL(t)
	c := libConn(t, url)
	q := testenv.Unique("cli.hostile")
	seedDLQ(t, c, q, 0)
	publishHostile(t, c, q+".dlq", "id"+hostileText, hostileText+"\nsecond line")
	publishHostile(t, c, q+".dlq", "id2", hostile)

	args := []string{"dlq", "show", q + ".dlq", "-n", "2", "--url", url}
	r := run0(t, "", args...)
	safeOnATerminal(t, "dlq show", r.stdout+r.stderr)
	for _, want := range []string{"--- id" + safetext.Line(hostileText), "type:        Order" + safetext.Line(hostileText), "correlation: corr" + safetext.Line(hostileText),
		"error:       reason " + safetext.Line(hostileText), "header:      x-note" + safetext.Line(hostile) + " = value " + safetext.Line(hostile),
		"body:\n" + safetext.Line(hostileText) + "\nsecond line\n", `\x1b[2J`, `\x1b]52;c;aGk=\x07`, `\x0d`, `\x9b`, `\u009b`, `\u202e`, `\x7f`, `\xff\xfe`} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("dlq show lacks %q:\n%s", want, r.stdout)
		}
	}

	r = run0(t, "", append(args, "--json")...)
	safeOnATerminal(t, "dlq show --json", r.stdout)
	var shown []shownMessage
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil {
		t.Fatalf("dlq show --json is not JSON: %v\n%s", err, r.stdout)
	}
	if len(shown) != 2 || shown[0].Type != "Order"+hostileText || shown[0].Error != "reason "+hostileText || shown[0].Body != hostileText+"\nsecond line" ||
		shown[1].Headers[decoded("x-note"+hostile)] != decoded("value "+hostile) {
		t.Fatalf("dlq show --json changed the values: %+v", shown)
	}

	r = run0(t, "", append(args, "--raw")...)
	if want := hostileText + "\nsecond line" + "\n" + hostile; r.stdout != want {
		t.Fatalf("dlq show --raw = %q, want the bodies byte for byte, one newline between: %q", r.stdout, want)
	}
	mustFailWithSentence(t, acemqCmd(t, "", append(args, "--raw", "--json")...), "pick one")
	rawRefusedOnATerminal(t, args...)
	if d := depth(t, c, q+".dlq"); d != 2 {
		t.Fatalf("dlq show removed the message: depth %d", d)
	}
}

func TestDLQListEscapesQueueNames(t *testing.T) {
	url := "memory://" + t.Name()
	defer memory.Delete(t.Name())
	c := libConn(t, url)
	name := "orders" + hostile + ".dlq"
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(name, acemq.QueueOptions{})); err != nil {
		t.Fatal(err)
	}
	out, err := inProcess(t, "dlq", "list", "--url", url)
	if err != nil {
		t.Fatal(err)
	}
	safeOnATerminal(t, "dlq list", out)
	if !strings.Contains(out, safetext.Line(name)) {
		t.Fatalf("dlq list does not show the name escaped:\n%s", out)
	}
	out, err = inProcess(t, "dlq", "list", "--url", url, "--json")
	if err != nil {
		t.Fatal(err)
	}
	safeOnATerminal(t, "dlq list --json", out)
	var listed []queueDepth
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 1 || listed[0].Name != decoded(name) {
		t.Fatalf("dlq list --json = %s (%v)", out, err)
	}
}

func TestTailEscapesWhatAPublisherChoseAndRawIsExact(t *testing.T) {
	url := testenv.AMQPURL(t)
	c := libConn(t, url)
	q := testenv.Unique("cli.tailhostile")
	// Classic: tail reads a quorum queue with a delivery limit only with
	// --unsafe-read (TestReadsNeverCountTowardADeliveryLimit).
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	deleteQueues(t, c, q)
	publishHostile(t, c, q, "id"+hostileText, hostile)
	args := []string{"tail", q, "-n", "1", "--url", url}
	r := run0(t, "", args...)
	safeOnATerminal(t, "tail", r.stdout+r.stderr)
	lines := parseTail(t, r.stdout)
	if len(lines) != 1 || lines[0].Type != "Order"+hostileText || lines[0].Body != decoded(hostile) || lines[0].Error != "reason "+hostileText {
		t.Fatalf("tail changed the values: %+v", lines)
	}
	r = run0(t, "", append(args, "--raw")...)
	if r.stdout != hostile {
		t.Fatalf("tail --raw = %q, want the body byte for byte %q", r.stdout, hostile)
	}
	rawRefusedOnATerminal(t, args...)
}

func TestStreamTailEscapesWhatAPublisherChoseAndRawIsExact(t *testing.T) {
	url := testenv.AMQPURL(t)
	s := streamFixture(t, url, 0)
	publishHostile(t, libConn(t, url), s, "id"+hostileText, hostile)
	args := []string{"stream", "tail", s, "--from", "first", "-n", "1", "--url", url}
	r := run0(t, "", args...)
	safeOnATerminal(t, "stream tail", r.stdout+r.stderr)
	var l streamLine
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || l.Type != "Order"+hostileText || l.Body != decoded(hostile) || l.CorrelationID != "corr"+hostileText {
		t.Fatalf("stream tail = %s (%v)", r.stdout, err)
	}
	r = run0(t, "", append(args, "--raw")...)
	if r.stdout != hostile {
		t.Fatalf("stream tail --raw = %q, want the body byte for byte %q", r.stdout, hostile)
	}
	rawRefusedOnATerminal(t, args...)
}

func TestSagaShowAndListEscapeStepErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "saga.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := saga.NewRunner(db, sqlstore.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := r.EnsureSchema(ctx); err != nil {
		t.Fatal(err)
	}
	def, err := saga.Define("order"+hostile,
		saga.Step{Name: "ship" + hostile, Action: func(context.Context, saga.Call) error { return errors.New("courier said " + hostile) }})
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Run(ctx, def, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"saga", "show", a.InstanceID}, {"saga", "list"}} {
		out := run0(t, "", append(args, "--db", "sqlite:"+path)...)
		safeOnATerminal(t, strings.Join(args[:2], " "), out.stdout+out.stderr)
		if !strings.Contains(out.stdout, safetext.Line("order"+hostile)) {
			t.Fatalf("%s does not show the saga's name escaped:\n%s", strings.Join(args[:2], " "), out.stdout)
		}
	}
	if out := run0(t, "", "saga", "show", a.InstanceID, "--db", "sqlite:"+path).stdout; !strings.Contains(out, safetext.Line("courier said "+hostile)) {
		t.Fatalf("saga show does not show the step's error escaped:\n%s", out)
	}
}

func TestReplayWarningQuotesAHostileIDEscaped(t *testing.T) {
	url := testenv.AMQPURL(t)
	c := libConn(t, url)
	q := testenv.Unique("cli.replayhostile")
	seedDLQ(t, c, q, 0)
	publishHostile(t, c, q+".dlq", "id"+hostileText, "{}")
	publishHostile(t, c, q+".dlq", "id"+hostileText, "{}")
	r := run0(t, "", "dlq", "replay", q+".dlq", "--url", url)
	safeOnATerminal(t, "dlq replay", r.stdout+r.stderr)
	if !strings.Contains(r.stderr, "(e.g. id"+safetext.Line(hostileText)+")") || !strings.Contains(r.stdout, "moved 2") {
		t.Fatalf("dlq replay:\nstdout %s\nstderr %s", r.stdout, r.stderr)
	}
}

func TestErrorsQuoteWhatTheyWereGivenEscaped(t *testing.T) {
	for _, args := range [][]string{
		{"tail", "q", "--bogus" + hostile},
		{"dlq", "show", "q.dlq", "--raw=" + hostile, "--url", "memory://x"},
	} {
		r := acemqCmd(t, "", args...)
		if r.code == 0 {
			t.Fatalf("acemq %q exited 0", args)
		}
		safeOnATerminal(t, "the error", r.stdout+r.stderr)
		if !strings.Contains(r.stderr, `a\x1b[2Jb\x1b]52;c;aGk`) {
			t.Fatalf("the error does not quote the input escaped: %q", r.stderr)
		}
	}
}

// The JSON commands' rewrite keeps JSON valid and every value exact: a
// round trip through jsonSafe decodes to what encoding/json wrote.
func TestJSONSafeKeepsValuesAndEscapesForTheTerminal(t *testing.T) {
	in := map[string]string{"k" + hostile: "v" + hostile + "\u2028\u2029 ok ü 日本"}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	safe := jsonSafe(b)
	safeOnATerminal(t, "jsonSafe", string(safe))
	var a, z map[string]string
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(safe, &z); err != nil {
		t.Fatalf("jsonSafe broke the JSON: %v\n%s", err, safe)
	}
	if len(a) != 1 || len(z) != 1 {
		t.Fatal(a, z)
	}
	for k, v := range a {
		if z[k] != v {
			t.Fatalf("jsonSafe changed a value: %q, want %q", z[k], v)
		}
	}
	if !bytes.Contains(safe, []byte(`\u202e`)) || !bytes.Contains(safe, []byte(`\u009b`)) || !bytes.Contains(safe, []byte(`\u007f`)) || !bytes.Contains(safe, []byte("ü 日本")) {
		t.Fatalf("jsonSafe: %s", safe)
	}
}

func TestTopologyPlanShowsNamesEscaped(t *testing.T) {
	// YAML's "\e" is ESC: a name from a file, or the broker's text about it.
	file := writeFile(t, "queues:\n  - name: \"orders\\e[2J\\e]52;c;aGk=\\a\\u202eq\"\n    type: classic\n")
	r := run0(t, "", "topology", "plan", "-f", file, "--url", "memory://plan")
	safeOnATerminal(t, "topology plan", r.stdout+r.stderr)
	if !strings.Contains(r.stdout, `queue orders\x1b[2J\x1b]52;c;aGk=\x07\u202eq (classic`) {
		t.Fatalf("topology plan does not show the name escaped:\n%s", r.stdout)
	}
}

func TestHealthLineFromAnActuatorIsEscaped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(map[string]any{"status": "UP", "components": map[string]any{
			"acemq":            map[string]any{"status": "UP", "details": map[string]any{"transport": "rabbitmq" + hostileText, "open": true}},
			"db" + hostileText: map[string]any{"status": "UP" + hostileText}}})
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	r := acemqCmd(t, "", "health", "--actuator", srv.URL)
	safeOnATerminal(t, "health", r.stdout+r.stderr)
	if !strings.Contains(r.stdout, "transport=rabbitmq"+safetext.Line(hostileText)) {
		t.Fatalf("health does not show the actuator's values escaped: %q", r.stdout)
	}
}
