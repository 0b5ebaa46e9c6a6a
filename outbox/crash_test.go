package outbox

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/outbox/internal/dbtest"
	"github.com/acemq-go/acemq/outbox/internal/testenv"
	"github.com/acemq-go/acemq/sqlstore"
)

// The crash test runs relays as real processes: the test binary started
// again with crashRole set runs one relay (runCrashRelay) instead of the
// tests, and prints one line per sweep.
const crashRole = "ACEMQ_OUTBOX_CRASH_ROLE"

// runCrashRelay is a relay process: it publishes the outbox in the
// database named by the environment through the broker named there until
// SIGTERM, printing "sweep <start ns> <end ns> <claimed> <published>
// <error>" after every sweep that claimed something.
func runCrashRelay() int {
	dialect, _ := sqlstore.ParseDialect(os.Getenv("ACEMQ_CRASH_DIALECT"))
	driver := map[sqlstore.Dialect]string{sqlstore.PostgreSQL: "pgx", sqlstore.MySQL: "mysql"}[dialect]
	db, err := sql.Open(driver, os.Getenv("ACEMQ_CRASH_DSN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer db.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	conn, err := acemq.Connect(ctx, os.Getenv("ACEMQ_CRASH_AMQP"), acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer conn.Close(context.Background())
	store, err := NewStore(db, dialect)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ttl, _ := time.ParseDuration(os.Getenv("ACEMQ_CRASH_TTL"))
	out := bufio.NewWriter(os.Stdout)
	var sweepStart time.Time
	relay, err := NewRelay(conn, store, WithRelayID(os.Getenv("ACEMQ_CRASH_RELAY")), WithInterval(20*time.Millisecond),
		WithLockTTL(ttl), WithLogger(slog.New(slog.DiscardHandler)),
		WithObserver(func(sw Sweep) {
			end := time.Now()
			if sw.Claimed > 0 {
				msg := "-"
				if sw.Err != nil {
					msg = strings.ReplaceAll(sw.Err.Error(), "\n", " ")
				}
				fmt.Fprintf(out, "sweep %d %d %d %d %s\n", sweepStart.UnixNano(), end.UnixNano(), sw.Claimed, sw.Published, msg)
				out.Flush()
			}
			sweepStart = time.Now()
		}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// Hold 50 ms between the confirm and the delete, announced, so the
	// test can freeze a relay that holds a claim with confirmed records.
	relay.afterConfirm = func(string) error {
		fmt.Fprintf(out, "confirmed %d\n", time.Now().UnixNano())
		out.Flush()
		time.Sleep(50 * time.Millisecond)
		return nil
	}
	sweepStart = time.Now()
	if err := relay.Run(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// sweepLine is one relay process's report of a sweep.
type sweepLine struct {
	relay              string
	start, end         time.Time
	claimed, published int
	err                string
	// confirmed marks a "confirmed" line: the relay holds confirmed
	// records it has not deleted yet (for 50 ms).
	confirmed bool
}

// crashRelay is one relay process of the crash test.
type crashRelay struct {
	id  string
	cmd *exec.Cmd
}

// crashRig starts relay processes and collects their sweep lines.
type crashRig struct {
	t      *testing.T
	env    []string
	ttl    time.Duration
	lines  chan sweepLine
	mu     sync.Mutex
	relays []*crashRelay
	seq    int
	wg     sync.WaitGroup
}

func (r *crashRig) start() *crashRelay {
	r.t.Helper()
	r.seq++
	id := fmt.Sprintf("crash-relay-%d", r.seq)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(r.env, crashRole+"=relay", "ACEMQ_CRASH_RELAY="+id, "ACEMQ_CRASH_TTL="+r.ttl.String())...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	cr := &crashRelay{id: id, cmd: cmd}
	r.mu.Lock()
	r.relays = append(r.relays, cr)
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.read(id, stdout)
		_ = cmd.Wait()
	}()
	return cr
}

func (r *crashRig) read(id string, out io.Reader) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 6)
		if len(f) == 2 && f[0] == "confirmed" {
			r.lines <- sweepLine{relay: id, confirmed: true}
			continue
		}
		if len(f) != 6 || f[0] != "sweep" {
			continue
		}
		start, _ := strconv.ParseInt(f[1], 10, 64)
		end, _ := strconv.ParseInt(f[2], 10, 64)
		claimed, _ := strconv.Atoi(f[3])
		published, _ := strconv.Atoi(f[4])
		r.lines <- sweepLine{relay: id, start: time.Unix(0, start), end: time.Unix(0, end), claimed: claimed, published: published, err: f[5]}
	}
}

// active waits for a sweep that published and returns its relay.
func (r *crashRig) active(deadline time.Duration) *crashRelay {
	r.t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case l := <-r.lines:
			if l.confirmed || l.published == 0 {
				continue
			}
			r.mu.Lock()
			for _, cr := range r.relays {
				if cr.id == l.relay && cr.cmd.ProcessState == nil {
					r.mu.Unlock()
					return cr
				}
			}
			r.mu.Unlock()
		case <-timeout:
			r.t.Fatalf("no relay published within %v", deadline)
		}
	}
}

// holding waits for a relay to announce confirmed records it has not
// deleted yet and returns it.
func (r *crashRig) holding(deadline time.Duration) *crashRelay {
	r.t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case l := <-r.lines:
			if l.confirmed {
				return r.relay(l.relay)
			}
		case <-timeout:
			r.t.Fatalf("no relay confirmed a batch within %v", deadline)
		}
	}
}

func (r *crashRig) relay(id string) *crashRelay {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cr := range r.relays {
		if cr.id == id {
			return cr
		}
	}
	r.t.Fatalf("no relay %s", id)
	return nil
}

// takeover waits for a relay other than gone to publish in a sweep that
// started after since; it returns when that sweep ended.
func (r *crashRig) takeover(gone string, since time.Time, deadline time.Duration) time.Duration {
	r.t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case l := <-r.lines:
			if l.relay != gone && !l.confirmed && l.published > 0 && l.end.After(since) {
				return l.end.Sub(since)
			}
		case <-timeout:
			r.t.Fatalf("no other relay published within %v of %s's end", deadline, gone)
		}
	}
}

// woken waits for the first sweep line of relay id that ended after
// since: the sweep the stop interrupted, or the next one.
func (r *crashRig) woken(id string, since time.Time, deadline time.Duration) sweepLine {
	r.t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case l := <-r.lines:
			if l.relay == id && !l.confirmed && l.end.After(since) {
				return l
			}
		case <-timeout:
			r.t.Fatalf("relay %s reported no sweep within %v of waking", id, deadline)
		}
	}
}

func (r *crashRig) stopAll() {
	r.mu.Lock()
	for _, cr := range r.relays {
		_ = cr.cmd.Process.Signal(syscall.SIGCONT)
		_ = cr.cmd.Process.Signal(syscall.SIGTERM)
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		for range r.lines { // keep the readers unblocked
		}
	}()
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		r.mu.Lock()
		for _, cr := range r.relays {
			_ = cr.cmd.Process.Kill()
		}
		r.mu.Unlock()
		<-done
	}
	close(r.lines)
}

// crashRounds is how many kill/stop rounds the crash test runs per
// database: 2 (one SIGKILL, one SIGSTOP) in make test,
// ACEMQ_OUTBOX_CRASH_ROUNDS for the longer run (make outbox-crash).
func crashRounds() int {
	if n, err := strconv.Atoi(os.Getenv("ACEMQ_OUTBOX_CRASH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 2
}

// Relays are real processes, SIGKILLed and SIGSTOPped in turn while two
// producers commit orders with their message (every fifth transaction
// rolls back). Afterwards every committed order's message was published
// (duplicates counted, allowed), none of a rolled-back one; each
// producer's messages arrived in commit order (first copies), and copies
// out of order, which only a relay frozen in the middle of one write can
// cause, are at most one per stop. After a kill another relay publishes
// within 2 s (the relay's session lock); after a stop within the lease,
// and the woken relay deletes nothing. The time from each kill or stop to
// the takeover is logged.
func TestCrashedRelaysLoseNothingAndAreTakenOver(t *testing.T) {
	forEachServerBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		db := s.DB()
		dsn := childDSN(t, s)
		url := testenv.AMQPURL(t)
		queue := testenv.Unique("outbox-crash")
		conn, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := conn.Apply(ctx, acemq.NewTopology().Queue(queue, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
			t.Fatal(err)
		}
		defer conn.DeleteQueue(ctx, queue) //nolint:errcheck // best effort
		if _, err := db.ExecContext(ctx, `CREATE TABLE crash_orders (id VARCHAR(64) PRIMARY KEY, producer INTEGER NOT NULL, n INTEGER NOT NULL)`); err != nil {
			t.Fatal(err)
		}

		const ttl = 2 * time.Second
		rig := &crashRig{t: t, ttl: ttl, lines: make(chan sweepLine, 4096),
			env: []string{"ACEMQ_CRASH_DIALECT=" + b.Name, "ACEMQ_CRASH_DSN=" + dsn, "ACEMQ_CRASH_AMQP=" + url}}
		for range 3 {
			rig.start()
		}

		pctx, stopProducers := context.WithCancel(ctx)
		var pwg sync.WaitGroup
		var pmu sync.Mutex
		rolledBack := map[string]bool{}
		for p := range 2 {
			pwg.Add(1)
			go func() {
				defer pwg.Done()
				tick := time.NewTicker(2 * time.Millisecond)
				defer tick.Stop()
				for n := 0; ; n++ {
					select {
					case <-pctx.Done():
						return
					case <-tick.C:
					}
					id := fmt.Sprintf("p%d-%06d", p, n)
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						t.Error(err)
						return
					}
					_, err = tx.ExecContext(ctx, s.q(`INSERT INTO crash_orders (id, producer, n) VALUES (?, ?, ?)`), id, p, n)
					if err == nil {
						_, err = s.Add(ctx, tx, conn, "", queue, order{ID: id, Amount: n}, WithEnvelope(acemq.Envelope{ID: id}))
					}
					if err != nil {
						tx.Rollback()
						t.Error(err)
						return
					}
					if n%5 == 4 {
						err = tx.Rollback()
						pmu.Lock()
						rolledBack[id] = true
						pmu.Unlock()
					} else {
						err = tx.Commit()
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}

		stops := 0
		for round := range crashRounds() {
			victim := rig.active(30 * time.Second)
			if round%2 == 0 {
				at := time.Now()
				if err := victim.cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				took := rig.takeover(victim.id, at, 10*time.Second)
				t.Logf("round %d: SIGKILL %s; another relay published %v later", round, victim.id, took.Round(time.Millisecond))
				if took > 2*time.Second {
					t.Errorf("takeover after SIGKILL took %v, want within 2s", took)
				}
				rig.start()
				continue
			}
			// Freeze a relay that holds a claim: between its confirm and
			// its delete.
			stops++
			victim = rig.holding(30 * time.Second)
			if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			at := time.Now()
			took := rig.takeover(victim.id, at, ttl+10*time.Second)
			t.Logf("round %d: SIGSTOP %s; another relay published %v later (lease %v)", round, victim.id, took.Round(time.Millisecond), ttl)
			if took > ttl+2*time.Second {
				t.Errorf("takeover after SIGSTOP took %v, want within the lease (%v) and a sweep", took, ttl)
			}
			// Stay frozen past the lease, then wake.
			if wait := time.Until(at.Add(ttl + 500*time.Millisecond)); wait > 0 {
				<-time.After(wait)
			}
			woke := time.Now()
			if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			l := rig.woken(victim.id, woke, 10*time.Second)
			if !l.start.Before(at) {
				t.Errorf("relay %s was not frozen inside a sweep (its next sweep started %v after the stop)", victim.id, l.start.Sub(at))
			}
			if l.published != 0 {
				t.Errorf("the woken relay %s deleted %d records after losing its claim (sweep %+v)", victim.id, l.published, l)
			}
			t.Logf("round %d: %s woke; its interrupted sweep: claimed %d, deleted %d, %s", round, victim.id, l.claimed, l.published, l.err)
		}
		stopProducers()
		pwg.Wait()
		for deadline := time.Now().Add(60 * time.Second); ; {
			p, err := s.Pending(ctx, 1)
			if err == nil && len(p) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("records still pending 60s after the producers stopped (%v)", err)
			}
			select {
			case <-rig.lines:
			case <-time.After(100 * time.Millisecond):
			}
		}
		rig.stopAll()

		got := ids(drain(t, conn, queue))
		committed, err := sqlstore.Column(ctx, db, `SELECT id FROM crash_orders ORDER BY producer, n`)
		if err != nil {
			t.Fatal(err)
		}
		checkCrashDelivery(t, got, committed, rolledBack, stops)
	})
}

// checkCrashDelivery checks what a consumer of the crash test's queue saw.
func checkCrashDelivery(t *testing.T, got []string, committed []any, rolledBack map[string]bool, stops int) {
	t.Helper()
	count := map[string]int{}
	for _, id := range got {
		count[id]++
		if rolledBack[id] {
			t.Errorf("message %s of a rolled-back order was published", id)
		}
	}
	dups := 0
	for _, c := range committed {
		id := c.(string)
		if count[id] == 0 {
			t.Errorf("committed order %s was never published", id)
		}
		dups += max(count[id]-1, 0)
	}
	if len(count) != len(committed) {
		t.Errorf("%d distinct messages published for %d committed orders", len(count), len(committed))
	}
	// Per producer, ids sort in commit order.
	for _, p := range []string{"p0-", "p1-"} {
		var firsts, all []string
		seen := map[string]bool{}
		for _, id := range got {
			if strings.HasPrefix(id, p) {
				all = append(all, id)
				if !seen[id] {
					seen[id] = true
					firsts = append(firsts, id)
				}
			}
		}
		if !slices.IsSorted(firsts) {
			t.Errorf("producer %s: first copies out of commit order", p)
		}
		last := lastCopies(all)
		stale := len(last) - longestSorted(last)
		if stale > stops {
			t.Errorf("producer %s: %d last copies out of order, more than the %d stops can explain", p, stale, stops)
		}
	}
	t.Logf("%d committed orders, %d rolled back, %d messages published (%d duplicates)", len(committed), len(rolledBack), len(got), dups)
}

// longestSorted is the length of the longest increasing subsequence of s.
func longestSorted(s []string) int {
	var tails []string
	for _, v := range s {
		i := sort.SearchStrings(tails, v)
		if i == len(tails) {
			tails = append(tails, v)
		} else {
			tails[i] = v
		}
	}
	return len(tails)
}

// childDSN is the DSN a relay process opens to reach s's database (the
// test's own schema or database).
func childDSN(t *testing.T, s *Store) string {
	t.Helper()
	ctx := context.Background()
	if s.Dialect() == sqlstore.PostgreSQL {
		var schema string
		if err := s.DB().QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
			t.Fatal(err)
		}
		url := testenv.PostgresURL(t)
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		return url + sep + "search_path=" + schema
	}
	var name string
	if err := s.DB().QueryRowContext(ctx, `SELECT DATABASE()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return dbtest.MySQLDSNFor(t, name)
}
