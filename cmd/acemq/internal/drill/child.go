package drill

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
)

// crashMsg is the payload the crash drill's processes send and read.
type crashMsg struct {
	Seq int `json:"seq"`
}

// record appends one line to the drill's record file with a single write
// on a file opened O_APPEND. A SIGKILL cannot undo a write(2) that has
// returned: the bytes are in the kernel's page cache, which outlives the
// process (only a machine crash would need fsync, and the drill kills
// processes, not machines). One write per line keeps concurrent writers'
// lines whole.
type record struct{ f *os.File }

func openRecord(path string) (*record, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot open the drill's record file: %w", err)
	}
	return &record{f: f}, nil
}

func (r *record) line(kind, id string) error {
	_, err := r.f.Write([]byte(kind + " " + id + "\n"))
	return err
}

// ChildMain runs the crash drill's child process: the process the drill
// SIGKILLs. It is reached through a hidden subcommand (`acemq drill child`)
// or, in this package's tests, through TestMain. args:
//
//	--mode publish|consume|outbox-produce|outbox-relay --url URL
//	--queue Q --record FILE [--workers N] [--work D] [--hold D] [--db URL]
//
// publish: N goroutines Send to Q and record "confirmed ID" only after Send
// returned nil. outbox-produce adds outbox records and records "committed
// ID" after each commit; outbox-relay runs a relay. consume: a consumer with N handlers records "done ID" after
// the work and then holds for --hold before returning Accept, so a kill
// that lands in the hold falls between the work and the ack. It runs until
// killed or ctx ends and returns the process exit code.
func ChildMain(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("drill child", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mode := fs.String("mode", "publish", "publish or consume")
	url := fs.String("url", "", "broker URL")
	queue := fs.String("queue", "", "queue")
	path := fs.String("record", "", "record file")
	workers := fs.Int("workers", 4, "publishing goroutines or consumer concurrency")
	work := fs.Duration("work", 5*time.Millisecond, "consume: time each handler works")
	hold := fs.Duration("hold", 50*time.Millisecond, "consume: time a handler holds after recording done")
	db := fs.String("db", "", "outbox-produce, outbox-relay: PostgreSQL URL")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var err error
	if strings.HasPrefix(*mode, "outbox-") {
		var rec *record
		if rec, err = openRecord(*path); err == nil {
			err = outboxChild(ctx, *mode, *url, *db, *queue, rec)
			rec.f.Close()
		}
	} else {
		err = child(ctx, *mode, *url, *queue, *path, *workers, *work, *hold)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func child(ctx context.Context, mode, url, queue, path string, workers int, work, hold time.Duration) error {
	rec, err := openRecord(path)
	if err != nil {
		return err
	}
	defer rec.f.Close()
	c, err := Env{URL: url}.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	switch mode {
	case "publish":
		pub := acemq.NewPublisher[crashMsg](c, "", queue, acemq.PublisherConfig{})
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for seq := 0; ctx.Err() == nil; seq++ {
					sent, err := pub.Send(ctx, crashMsg{Seq: seq})
					if err != nil {
						continue // not confirmed: not recorded
					}
					if err := rec.line("confirmed", sent.Envelope.ID); err != nil {
						return
					}
				}
			}()
		}
		wg.Wait()
		return nil
	case "consume":
		k, err := acemq.Consume(ctx, c, queue, func(ctx context.Context, m *acemq.Message[crashMsg]) acemq.Decision {
			_ = rec.line("start", m.Envelope.ID)
			if sleepCtx(ctx, work) != nil {
				return acemq.InProgress(0)
			}
			_ = rec.line("done", m.Envelope.ID)
			_ = sleepCtx(ctx, hold) // a kill here lands after the work, before the ack
			return acemq.Accept()
		}, acemq.ConsumerConfig{Concurrency: workers, Prefetch: workers})
		if err != nil {
			return err
		}
		<-ctx.Done()
		return k.Close(context.Background())
	}
	return fmt.Errorf("acemq: unknown drill child mode %q (publish or consume)", mode)
}
