package loadline_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq/internal/alarmtest"

	"go.uber.org/goleak"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/loadline"
	"github.com/acemq-go/acemq/transport/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var order = []string{"at", "elapsedMs", "blocked", "published", "confirmed", "consumed", "failed", "publishRate", "consumeRate", "refused", "reason"}

// keysInOrder returns a line's top-level keys in the order written.
func keysInOrder(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %q", line)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

type fake struct {
	st      acemq.StatsSnapshot
	blocked bool
	reason  string
}

func (f *fake) Stats() acemq.StatsSnapshot { s := f.st; s.At = time.Now(); return s }
func (f *fake) Blocked() bool              { return f.blocked }
func (f *fake) Health(context.Context) acemq.HealthReport {
	return acemq.HealthReport{Blocked: f.blocked, BlockedReason: f.reason}
}

var atRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestLineHasTheContractFieldsInOrderAndReasonOnlyWhenBlocked(t *testing.T) {
	f := &fake{st: acemq.StatsSnapshot{Published: 10, Confirmed: 9, Consumed: 8, Failed: 1, Refused: 2}}
	s := loadline.NewSampler(f)
	line := string(s.Sample().AppendJSON(nil))
	if got := keysInOrder(t, line); strings.Join(got, ",") != strings.Join(order[:10], ",") {
		t.Fatalf("keys %v", got)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		t.Fatal(err)
	}
	if !atRE.MatchString(v["at"].(string)) || v["blocked"] != false || v["published"] != 10.0 || v["confirmed"] != 9.0 ||
		v["consumed"] != 8.0 || v["failed"] != 1.0 || v["refused"] != 2.0 {
		t.Fatalf("line %s", line)
	}
	f.blocked, f.reason = true, "low on memory"
	line = string(s.Sample().AppendJSON(nil))
	if got := keysInOrder(t, line); strings.Join(got, ",") != strings.Join(order, ",") {
		t.Fatalf("keys %v", got)
	}
	if !strings.HasSuffix(line, `,"reason":"low on memory"}`) {
		t.Fatalf("line %s", line)
	}
}

func TestRatesCountConfirmsAndDeliveriesOverTheInterval(t *testing.T) {
	f := &fake{}
	s := loadline.NewSampler(f)
	_ = s.Sample()
	f.st.Confirmed, f.st.Consumed = 1000, 500
	x := s.Sample()
	if x.PublishRate <= 0 || x.ConsumeRate <= 0 || x.PublishRate < x.ConsumeRate {
		t.Fatalf("rates %v %v", x.PublishRate, x.ConsumeRate)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
	n  chan struct{}
}

func (w *syncBuf) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.n <- struct{}{}:
	default:
	}
	return w.b.Write(p)
}

func TestRunWritesPerIntervalAndAFinalLineFromAConn(t *testing.T) {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://loadline", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	b := memory.Lookup("loadline")
	held := alarmtest.BlockAndWait(t, c, b, "low on memory")
	w := &syncBuf{n: make(chan struct{}, 1)}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- loadline.Run(rctx, c, w, time.Millisecond) }()
	<-w.n // at least one interval line
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	out := w.b.String()
	w.mu.Unlock()
	sc := bufio.NewScanner(strings.NewReader(out))
	lines := 0
	for sc.Scan() {
		lines++
		var v map[string]any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("line %d: %v: %s", lines, err, sc.Text())
		}
		if v["blocked"] != true || v["reason"] != "low on memory" {
			t.Fatalf("line %s", sc.Text())
		}
		if got := keysInOrder(t, sc.Text()); strings.Join(got, ",") != strings.Join(order, ",") {
			t.Fatalf("keys %v", got)
		}
	}
	if lines < 2 {
		t.Fatalf("%d lines, want an interval line and the final line:\n%s", lines, out)
	}
	b.Unblock()
	alarmtest.HeldConfirms(t, held)
}
