package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
	"github.com/acemq-go/acemq/console/internal/testenv"
)

// BenchmarkBrowse100k measures what the console's reads cost on the real
// broker with a .dlq of 100,000 messages (about 300 bytes each, three
// reasons): the queue page as shipped (it reads ScanLimit = 10,000
// messages for its reason groups), a first page that reads only its 50
// rows, the whole queue (ScanLimit 100,000), and one message's page. Each
// read takes its messages with replay.Browse and returns them all; the
// time includes the wait until the broker counts them ready again.
//
//	make services-up; set -a; . .tmp/rabbitmq/env; set +a
//	go test -run '^$' -bench Browse100k -benchtime 1x ./console/
func BenchmarkBrowse100k(b *testing.B) {
	u := testenv.AMQPURL(b)
	const n = 100_000
	ctx := context.Background()
	c, err := acemq.Connect(ctx, u, acemq.Config{Logger: slog.New(slog.DiscardHandler), ConfirmTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	q := testenv.Unique("console.bench")
	dlq := acemq.DeadLetterQueue(q)
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic}).DeadLetters(q)); err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, name := range []string{q, dlq, acemq.ParkedQueue(q)} {
			_, _ = c.DeleteQueue(context.Background(), name)
		}
	}()
	start := time.Now()
	reasons := []string{"exhausted 6 attempts: payment gateway timed out after 30s", "the handler rejected it: unknown SKU", "could not be decoded: unexpected EOF"}
	var wg sync.WaitGroup
	var first string
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				env := acemq.NewEnvelope()
				env.Type, env.Error, env.Attempt = "OrderPlaced", reasons[i%3], 6
				if i == 0 {
					first = env.ID
				}
				body := fmt.Appendf(nil, `{"order":"o-%06d","customer":"c-%d","lines":[{"sku":"SKU-%d","qty":%d,"cents":1999}],"note":"%0200d"}`, i, i%977, i%89, 1+i%5, 0)
				if err := c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: dlq, ContentType: "application/json", MessageID: env.ID, Headers: env.WireHeaders(), Body: body}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	b.Logf("filled %s with %d messages in %v", dlq, n, time.Since(start).Round(time.Millisecond))
	get := func(b *testing.B, scan int, path string) {
		con, err := console.New(c, console.Config{URL: u, ManagementURL: mgmtURL(u), Token: token, ScanLimit: scan})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			rec := httptest.NewRecorder()
			con.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("%s: %d %s", path, rec.Code, rec.Body.String())
			}
		}
		b.StopTimer()
		// Everything read is back (RabbitMQ may still be counting it in).
		deadline := time.Now().Add(2 * time.Minute)
		for {
			info, err := c.QueueInfo(ctx, dlq)
			if err == nil && info.Messages == n {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s holds %d two minutes after reading (%v), want %d", dlq, info.Messages, err, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		b.StartTimer()
	}
	for _, r := range []struct {
		name string
		scan int
		path string
	}{
		{"queue-page-scan-10000", 10_000, "/q/" + dlq},
		{"first-page-only-50", 50, "/q/" + dlq},
		{"whole-queue-100000", n, "/q/" + dlq},
		{"message-page-first", 10_000, "/q/" + dlq + "/m/" + first},
	} {
		b.Run(r.name, func(b *testing.B) { get(b, r.scan, r.path) })
	}
}
