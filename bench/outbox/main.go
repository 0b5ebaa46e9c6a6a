// Command outbox measures the transactional outbox's relay on one
// RabbitMQ broker:
//
//	raw     raw amqp091-go, pipelined confirms on one channel (window
//	        1000), mandatory, publishing the bytes and headers the relay
//	        publishes: the broker's ceiling for the relay; and the same
//	        in batches of -batch, each confirmed before the next is
//	        written: the ceiling of a relay that publishes a batch at a
//	        time
//	pg      one relay draining a filled outbox on PostgreSQL, with -batch
//	        and again with -big-batch
//	sqlite  one relay draining a filled outbox on SQLite
//	lag     the acemq.outbox.lag distribution on PostgreSQL (with the
//	        pgnotify wake-up) while -producers goroutines add a steady
//	        -rate records/s for -for, each record in its own transaction,
//	        paced open-loop (see lagRun), with a consumer acking the
//	        destination queue as a service would (-lag-consumer=false:
//	        none, and the growing queue's slower confirms enter the lag)
//
// Each drain runs -repeat times on a freshly filled table and the median
// rate is reported. Lag runs from Store.Add (before the commit) to the
// broker's confirm; it is read from the acemq.outbox.lag histogram with
// 5 ms buckets up to 1 s and 100 ms buckets up to 10 s, so a percentile is
// reported as its bucket's upper bound (or the maximum, when lower). The
// lag row also says how many records the producers added and at what rate
// (from the first slot to the last commit), and how many began late: on a
// machine too busy for the asked rate they add fewer, and the row says so.
// -cpuprofile profiles the bench process (relay, producers, raw client).
// -lag-trace writes the lag run's slow moments: per 100 ms of Add times,
// those holding a record that took > 250 ms from Add to the consumer, with
// the producers' longest Add → commit and the relay's longest sweep then,
// to set beside the database's log (checkpoints, autovacuum).
//
//	cd bench && go run ./outbox -url amqp://guest:guest@127.0.0.1:5672/ -pg postgres://...
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	amqp "github.com/rabbitmq/amqp091-go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/outbox"
	"github.com/acemq-go/acemq/outbox/pgnotify"
	"github.com/acemq-go/acemq/sqlstore"
)

// drainWait is -drain-wait.
var drainWait time.Duration

// orderBody is the payload every record carries: a small JSON order.
type orderBody struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

func main() {
	url := flag.String("url", os.Getenv("ACEMQ_URL"), "RabbitMQ URL (default $ACEMQ_URL)")
	pg := flag.String("pg", os.Getenv("ACEMQ_TEST_POSTGRES_URL"), "PostgreSQL URL (pgx); empty skips the PostgreSQL rows")
	n := flag.Int("n", 20000, "records per drain")
	batch := flag.Int("batch", outbox.DefaultBatchSize, "relay batch size")
	big := flag.Int("big-batch", 1000, "a second PostgreSQL drain with this batch size (the Conn's confirm window, 1000 by default; 0 skips it)")
	repeat := flag.Int("repeat", 3, "runs per drain; the median is reported")
	rate := flag.Int("rate", 1000, "records per second for the lag run")
	lagFor := flag.Duration("for", time.Minute, "length of the lag run (0 skips it)")
	only := flag.String("only", "", "run only the rows whose name contains one of these comma-separated texts (raw, pg, sqlite, lag)")
	flag.DurationVar(&drainWait, "drain-wait", 3*time.Minute, "how long the lag run waits for the relay's backlog after the producers stop")
	producers := flag.Int("producers", 32, "producer goroutines for the lag run (each record is one transaction)")
	flag.DurationVar(&relayInterval, "relay-interval", 0, "the lag run's relay poll interval (0: the library's default, 1s); a diagnostic: a tail that shrinks with it is a missed wake-up")
	flag.StringVar(&lagTracePath, "lag-trace", "", "write the lag run's slow 100 ms windows (a record > 250 ms from Add to the consumer) with the producers' commit times and the relay's sweep times to this file")
	flag.BoolVar(&lagConsumer, "lag-consumer", true, "the lag run's queue has a consumer acking what the relay publishes (false: the queue grows, and the broker's confirms slow with it)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (bench process: relay, producers, raw client) to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatalf("bench: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatalf("bench: %v", err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if *url == "" {
		log.Fatal("bench: give the broker with -url or ACEMQ_URL")
	}
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, *url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatalf("bench: %v", err)
	}
	defer conn.Close(ctx)
	queue := fmt.Sprintf("bench.outbox.%d", time.Now().UnixNano())
	if err := conn.Apply(ctx, acemq.NewTopology().Queue(queue, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		log.Fatalf("bench: %v", err)
	}
	defer conn.DeleteQueue(ctx, queue) //nolint:errcheck // best effort

	dir, err := os.MkdirTemp("", "acemq-outbox-bench")
	if err != nil {
		log.Fatalf("bench: %v", err)
	}
	defer os.RemoveAll(dir)
	lite, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "outbox.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatalf("bench: %v", err)
	}
	defer lite.Close()

	want := func(name string) bool {
		if *only == "" {
			return true
		}
		for _, o := range strings.Split(*only, ",") {
			if o != "" && strings.Contains(name, o) {
				return true
			}
		}
		return false
	}
	type row struct {
		name  string
		value string
	}
	var rows []row
	var rawRate, pgRate float64
	if want("raw") {
		rec := sampleRecord(ctx, conn, lite, queue)
		rawRate = median(*repeat, func() float64 {
			r, err := rawPipelined(*url, queue, rec, *n, 1000)
			if err != nil {
				log.Fatalf("bench: raw: %v", err)
			}
			_, _ = conn.PurgeQueue(ctx, queue)
			fmt.Fprintf(os.Stderr, "raw: %.0f msg/s\n", r)
			return r
		})
		rows = append(rows, row{"raw amqp091-go pipelined, window 1000, same bytes", fmt.Sprintf("%.0f msg/s", rawRate)})
		stepped := median(*repeat, func() float64 {
			r, err := rawStepped(*url, queue, rec, *n, *batch)
			if err != nil {
				log.Fatalf("bench: raw stepped: %v", err)
			}
			_, _ = conn.PurgeQueue(ctx, queue)
			fmt.Fprintf(os.Stderr, "raw stepped: %.0f msg/s\n", r)
			return r
		})
		rows = append(rows, row{fmt.Sprintf("raw amqp091-go, batches of %d, each confirmed before the next is written (a relay's ceiling at -batch)", *batch),
			fmt.Sprintf("%.0f msg/s (%.2f × raw)", stepped, stepped/rawRate)})
	}
	drain := func(name string, db *sql.DB, d sqlstore.Dialect, batch int) float64 {
		return median(*repeat, func() float64 {
			store := freshStore(ctx, db, d)
			fill(ctx, store, conn, queue, *n, d)
			r := drainRate(ctx, conn, store, *n, batch)
			_, _ = conn.PurgeQueue(ctx, queue)
			fmt.Fprintf(os.Stderr, "%s: %.0f records/s\n", name, r)
			return r
		})
	}
	var pgdb *sql.DB
	if *pg != "" {
		if pgdb, err = sql.Open("pgx", *pg); err != nil {
			log.Fatalf("bench: %v", err)
		}
		// database/sql keeps 2 idle connections by default: the producers
		// beyond two would open a new PostgreSQL session (a backend
		// process) for every transaction, which is what held the lag
		// run's producers to ~300 records/s.
		pgdb.SetMaxIdleConns(*producers + 8)
		defer pgdb.Close()
	}
	if pgdb != nil && want("pg") {
		pgRate = drain("pg", pgdb, sqlstore.PostgreSQL, *batch)
		rows = append(rows, row{fmt.Sprintf("relay drain, PostgreSQL, batch %d", *batch), fmt.Sprintf("%.0f records/s", pgRate)})
		if rawRate > 0 {
			rows = append(rows, row{"ratio PostgreSQL relay / raw  target >= 0.5", fmt.Sprintf("%.2f", pgRate/rawRate)})
		}
		if *big > 0 {
			r := drain(fmt.Sprintf("pg batch %d", *big), pgdb, sqlstore.PostgreSQL, *big)
			rows = append(rows, row{fmt.Sprintf("relay drain, PostgreSQL, batch %d (outbox.WithBatchSize)", *big), fmt.Sprintf("%.0f records/s", r)})
			if rawRate > 0 {
				rows = append(rows, row{fmt.Sprintf("ratio PostgreSQL relay batch %d / raw", *big), fmt.Sprintf("%.2f", r/rawRate)})
			}
		}
	}
	if want("sqlite") {
		r := drain("sqlite", lite, sqlstore.SQLite, *batch)
		rows = append(rows, row{fmt.Sprintf("relay drain, SQLite, batch %d", *batch), fmt.Sprintf("%.0f records/s", r)})
		if rawRate > 0 {
			rows = append(rows, row{"ratio SQLite relay / raw", fmt.Sprintf("%.2f", r/rawRate)})
		}
	}
	if pgdb != nil && *lagFor > 0 && want("lag") {
		lr := lagRun(ctx, conn, pgdb, queue, *rate, *lagFor, *batch, *producers)
		_, _ = conn.PurgeQueue(ctx, queue)
		consumed := "destination consumed"
		if !lagConsumer {
			consumed = "no consumer on the destination"
		}
		rows = append(rows, row{fmt.Sprintf("lag, PostgreSQL + pgnotify, "+consumed+", asked %d records/s for %v: added %d in %.1fs = %.0f records/s (%d late by > 100 ms)",
			*rate, *lagFor, lr.added, lr.took.Seconds(), float64(lr.added)/lr.took.Seconds(), lr.late),
			fmt.Sprintf("p50 ≤ %s, p90 ≤ %s, p99 ≤ %s, max ≤ %s", lr.p[0], lr.p[1], lr.p[2], lr.p[3])})
		rows = append(rows, row{"  of which Add → commit in the producer (included in the lag; not the relay's)",
			fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s", lr.tx[0], lr.tx[1], lr.tx[2], lr.tx[3])})
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "row\tresult")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r.name, r.value)
	}
	tw.Flush()
}

func median(runs int, f func() float64) float64 {
	rs := make([]float64, runs)
	for i := range rs {
		rs[i] = f()
	}
	sort.Float64s(rs)
	return rs[len(rs)/2]
}

// freshStore drops and recreates the outbox table.
func freshStore(ctx context.Context, db *sql.DB, d sqlstore.Dialect) *outbox.Store {
	if _, err := db.ExecContext(ctx, `DROP TABLE IF EXISTS `+outbox.Table); err != nil {
		log.Fatalf("bench: %v", err)
	}
	s, err := outbox.NewStore(db, d)
	if err != nil {
		log.Fatalf("bench: %v", err)
	}
	if err := s.EnsureSchema(ctx); err != nil {
		log.Fatalf("bench: %v", err)
	}
	return s
}

// fill adds n records in transactions of 100 (4 producers on PostgreSQL,
// one on SQLite, which has one writer).
func fill(ctx context.Context, s *outbox.Store, conn *acemq.Conn, queue string, n int, d sqlstore.Dialect) {
	producers := 4
	if d == sqlstore.SQLite {
		producers = 1
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				from := int(next.Add(100)) - 100
				if from >= n {
					return
				}
				tx, err := s.DB().BeginTx(ctx, nil)
				if err != nil {
					log.Fatalf("bench: %v", err)
				}
				for i := from; i < min(from+100, n); i++ {
					if _, err := s.Add(ctx, tx, conn, "", queue, order(i)); err != nil {
						log.Fatalf("bench: %v", err)
					}
				}
				if err := tx.Commit(); err != nil {
					log.Fatalf("bench: %v", err)
				}
			}
		}()
	}
	wg.Wait()
}

func order(i int) orderBody {
	return orderBody{ID: fmt.Sprintf("order-%08d", i), Customer: fmt.Sprintf("customer-%04d", i%1000), Amount: 1000 + i%9000, Currency: "EUR"}
}

// drainRate runs one relay until it published n records and returns the
// rate from its start.
func drainRate(ctx context.Context, conn *acemq.Conn, s *outbox.Store, n, batch int) float64 {
	var published atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	relay, err := outbox.NewRelay(conn, s, outbox.WithBatchSize(batch), outbox.WithLogger(slog.New(slog.DiscardHandler)),
		outbox.WithObserver(func(sw outbox.Sweep) {
			if sw.Err != nil && !errors.Is(sw.Err, context.Canceled) {
				log.Printf("bench: sweep: %v", sw.Err)
			}
			if published.Add(int64(sw.Published)) >= int64(n) {
				once.Do(func() { close(done) })
			}
		}))
	if err != nil {
		log.Fatalf("bench: %v", err)
	}
	start := time.Now()
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- relay.Run(rctx) }()
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		log.Fatalf("bench: the relay published only %d of %d records in 10 minutes", published.Load(), n)
	}
	took := time.Since(start)
	cancel()
	<-ran
	return float64(n) / took.Seconds()
}

// sampleRecord stores one record and returns it as the relay would read
// it: the bytes and headers the raw row publishes.
func sampleRecord(ctx context.Context, conn *acemq.Conn, db *sql.DB, queue string) outbox.Record {
	s := freshStore(ctx, db, sqlstore.SQLite)
	fill(ctx, s, conn, queue, 1, sqlstore.SQLite)
	p, err := s.Pending(ctx, 1)
	if err != nil || len(p) != 1 {
		log.Fatalf("bench: cannot read the sample record: %v", err)
	}
	return p[0]
}

// confirming dials url and opens a channel in confirm mode whose confirms
// arrive on the returned channel (buffered to buf).
func confirming(url string, buf int) (*amqp.Connection, *amqp.Channel, <-chan amqp.Confirmation, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, nil, nil, err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	return conn, ch, ch.NotifyPublish(make(chan amqp.Confirmation, buf)), nil
}

func rawPipelined(url, q string, rec outbox.Record, n, window int) (float64, error) {
	conn, ch, confirms, err := confirming(url, window)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	sem := make(chan struct{}, window)
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			c, ok := <-confirms
			if !ok || !c.Ack {
				done <- errors.New("a publish was not acked")
				return
			}
			<-sem
		}
		done <- nil
	}()
	ctx := context.Background()
	start := time.Now()
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		if err := ch.PublishWithContext(ctx, "", q, true, false, amqp.Publishing{
			DeliveryMode: 2, ContentType: rec.ContentType, MessageId: rec.ID, Headers: amqp.Table(rec.Headers), Body: rec.Body,
		}); err != nil {
			return 0, err
		}
	}
	err = <-done
	return float64(n) / time.Since(start).Seconds(), err
}

// rawStepped publishes n records as rawPipelined does, in batches of
// batch whose confirms all arrive before the next batch is written: what
// a relay that publishes one batch at a time could reach with no database
// work at all.
func rawStepped(url, q string, rec outbox.Record, n, batch int) (float64, error) {
	conn, ch, confirms, err := confirming(url, batch)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx := context.Background()
	start := time.Now()
	for sent := 0; sent < n; {
		k := min(batch, n-sent)
		for range k {
			if err := ch.PublishWithContext(ctx, "", q, true, false, amqp.Publishing{
				DeliveryMode: 2, ContentType: rec.ContentType, MessageId: rec.ID, Headers: amqp.Table(rec.Headers), Body: rec.Body,
			}); err != nil {
				return 0, err
			}
		}
		for range k {
			if c, ok := <-confirms; !ok || !c.Ack {
				return 0, errors.New("a publish was not acked")
			}
		}
		sent += k
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// lagResult is what lagRun measured.
type lagResult struct {
	added int64         // records committed
	late  int64         // records whose transaction began > 100 ms after its slot
	took  time.Duration // from the first slot to the last commit
	p     [4]string     // p50, p90, p99, max of acemq.outbox.lag
	tx    [4]string     // p50, p90, p99, max of Add to commit (part of the lag the relay cannot shorten)
}

// relayInterval is the lag run's outbox.WithInterval (0: the default).
var relayInterval time.Duration

// lagConsumer makes the lag run consume (and ack) the queue the relay
// publishes to.
var lagConsumer bool

// lagTracePath is -lag-trace.
var lagTracePath string

// lagRun adds rate records/s for d, each in its own transaction, while a
// relay with the pgnotify wake-up publishes them, and returns how many
// were added, at what rate, and the p50, p90, p99 and max of
// acemq.outbox.lag. The load is open-loop: a pacer hands out one slot
// every 1/rate s (a batch of due slots every millisecond or so) to
// producers goroutines, so a slow transaction delays only its own record
// and the achieved rate is what the database accepted, not what a
// closed loop of producers happened to manage. A record whose
// transaction began more than 100 ms after its slot counts as late: many
// late records mean the producers, not the relay, set the pace.

func lagRun(ctx context.Context, conn *acemq.Conn, db *sql.DB, queue string, rate int, d time.Duration, batch, producers int) lagResult {
	s := freshStore(ctx, db, sqlstore.PostgreSQL)
	var bounds []float64
	for ms := 5; ms <= 1000; ms += 5 {
		bounds = append(bounds, float64(ms)/1000)
	}
	for ms := 1100; ms <= 10000; ms += 100 {
		bounds = append(bounds, float64(ms)/1000)
	}
	bounds = append(bounds, 30, 60)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithView(sdkmetric.NewView(
		sdkmetric.Instrument{Name: "acemq.outbox.lag"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: bounds}},
	)))
	defer mp.Shutdown(ctx) //nolint:errcheck // nothing to flush
	total := int(float64(rate) * d.Seconds())
	var trace *lagTrace
	opts := []outbox.RelayOption{outbox.WithBatchSize(batch), outbox.WithNotifier(pgnotify.New(db)),
		outbox.WithMeterProvider(mp), outbox.WithLogger(slog.New(slog.DiscardHandler))}
	if lagTracePath != "" {
		trace = newLagTrace(total)
		opts = append(opts, outbox.WithObserver(trace.sweep))
	}
	if relayInterval > 0 {
		opts = append(opts, outbox.WithInterval(relayInterval))
	}
	relay, err := outbox.NewRelay(conn, s, opts...)
	if err != nil {
		log.Fatalf("bench: %v", err)
	}
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- relay.Run(rctx) }()
	if lagConsumer {
		// A service consumes the queue the relay publishes to, as in
		// production: the broker's cost of a growing queue (a backlog of
		// persistent messages, paged to disk) stays out of the relay's lag.
		k, err := acemq.Consume(ctx, conn, queue, func(_ context.Context, m *acemq.Message[[]byte]) acemq.Decision {
			if trace != nil {
				trace.receivedBody(m.Body)
			}
			return acemq.Accept()
		},
			acemq.ConsumerConfig{Codec: acemq.Bytes(), Prefetch: 500, NoDeadLetterDeclaration: true})
		if err != nil {
			log.Fatalf("bench: lag consumer: %v", err)
		}
		defer k.Close(context.WithoutCancel(ctx)) //nolint:errcheck // best effort
	}

	// Warm-up, outside the measured minute: each producer's connection is
	// opened and its first Add made, in a transaction rolled back (no
	// record, no lag). Without it the minute began with every producer
	// opening a connection to a table just created, at once: inserts of
	// 40–130 ms for the first half second (auto_explain), and the records
	// of that second were most of the slowest 1 %.
	warm := make([]*sql.Tx, producers)
	for i := range warm {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			log.Fatalf("bench: %v", err)
		}
		if _, err := s.Add(ctx, tx, conn, "", queue, order(-1)); err != nil {
			log.Fatalf("bench: %v", err)
		}
		warm[i] = tx
	}
	for _, tx := range warm {
		_ = tx.Rollback()
	}
	slots := make(chan time.Time, total)
	var next atomic.Int64 // the records' numbers, order(i)
	var added, late atomic.Int64
	var lastCommit atomic.Int64
	var commitsMu sync.Mutex
	commits := make([]time.Duration, 0, total) // Add to commit, per record
	var wg sync.WaitGroup
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for due := range slots {
				i := int(next.Add(1) - 1)
				if time.Since(due) > 100*time.Millisecond {
					late.Add(1)
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					log.Fatalf("bench: %v", err)
				}
				adding := time.Now()
				if trace != nil {
					trace.added[i].Store(adding.UnixNano())
				}
				if _, err := s.Add(ctx, tx, conn, "", queue, order(i)); err != nil {
					log.Fatalf("bench: %v", err)
				}
				if err := tx.Commit(); err != nil {
					log.Fatalf("bench: %v", err)
				}
				took := time.Since(adding)
				if trace != nil {
					trace.committed[i].Store(adding.Add(took).UnixNano())
				}
				commitsMu.Lock()
				commits = append(commits, took)
				commitsMu.Unlock()
				added.Add(1)
				lastCommit.Store(time.Now().UnixNano())
			}
		}()
	}
	start := time.Now()
	every := time.Second / time.Duration(rate)
	for i := 0; i < total; {
		due := start.Add(time.Duration(i) * every)
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait) // pacing the load, not synchronising
		}
		for now := time.Now(); i < total && !start.Add(time.Duration(i)*every).After(now); i++ {
			slots <- start.Add(time.Duration(i) * every)
		}
	}
	close(slots)
	wg.Wait()
	took := time.Duration(lastCommit.Load() - start.UnixNano())
	// A relay slower than the producers leaves a backlog: wait for it
	// (the lag distribution then shows it) up to -drain-wait.
	stopped := time.Now()
	for {
		p, err := s.Pending(ctx, 0)
		if err == nil && len(p) == 0 {
			break
		}
		if time.Since(stopped) > drainWait {
			log.Printf("bench: lag: %d records still pending %v after the producers stopped; the relay is slower than the asked rate here, and the lag below leaves them out", len(p), drainWait)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := time.Since(stopped); d > time.Second {
		log.Printf("bench: lag: the relay drained its backlog %v after the producers stopped", d.Round(100*time.Millisecond))
	}
	cancel()
	<-ran
	if trace != nil {
		f, err := os.Create(lagTracePath)
		if err != nil {
			log.Fatalf("bench: %v", err)
		}
		trace.write(f, 250*time.Millisecond)
		if err := f.Close(); err != nil {
			log.Fatalf("bench: %v", err)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatalf("bench: %v", err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if m.Name != "acemq.outbox.lag" || !ok {
				continue
			}
			counts := make([]uint64, len(bounds)+1)
			var total uint64
			var maxLag float64
			for _, dp := range h.DataPoints {
				for i, c := range dp.BucketCounts {
					counts[i] += c
					total += c
				}
				if v, ok := dp.Max.Value(); ok && v > maxLag {
					maxLag = v
				}
			}
			// A percentile is its bucket's upper bound, or the maximum
			// when that is lower.
			pct := func(q float64) string {
				need := uint64(q * float64(total))
				var seen uint64
				for i, c := range counts {
					seen += c
					if seen >= need && i < len(bounds) {
						return fmt.Sprintf("%.0f ms", min(bounds[i], maxLag)*1000)
					}
				}
				return fmt.Sprintf("%.0f ms", maxLag*1000)
			}
			sort.Slice(commits, func(i, j int) bool { return commits[i] < commits[j] })
			tx := func(q float64) string {
				if len(commits) == 0 {
					return "-"
				}
				return fmt.Sprintf("%.0f ms", float64(commits[min(int(q*float64(len(commits))), len(commits)-1)])/1e6)
			}
			return lagResult{added: added.Load(), late: late.Load(), took: took,
				p:  [4]string{pct(0.5), pct(0.9), pct(0.99), fmt.Sprintf("%.0f ms", maxLag*1000)},
				tx: [4]string{tx(0.5), tx(0.9), tx(0.99), tx(1)}}
		}
	}
	log.Fatal("bench: no acemq.outbox.lag recorded")
	return lagResult{}
}
