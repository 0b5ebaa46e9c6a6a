// Command lateness measures how late (or early) the scheduler delivers,
// for delays from 1 s to 2 min, against the broker at -url:
//
//	go run ./schedule/internal/lateness -url amqp://…
//
// It schedules -n messages per delay at once, runs a Scheduler, and
// prints per delay the min, median and max of (arrival − due time).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/schedule"
)

func main() {
	url := flag.String("url", "memory://lateness", "broker URL")
	n := flag.Int("n", 5, "messages per delay")
	delaysFlag := flag.String("delays", "1s,2s,5s,10s,30s,1m,2m", "delays, comma-separated")
	flag.Parse()
	var delays []time.Duration
	for _, s := range strings.Split(*delaysFlag, ",") {
		d, err := time.ParseDuration(s)
		if err != nil {
			log.Fatal(err)
		}
		delays = append(delays, d)
	}
	ctx := context.Background()
	c, err := acemq.Connect(ctx, *url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	s, err := schedule.Start(ctx, c)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	q := "acemq.lateness." + strconv.Itoa(os.Getpid())
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		log.Fatal(err)
	}
	defer c.DeleteQueue(ctx, q)
	var mu sync.Mutex
	late := map[time.Duration][]time.Duration{}
	due := map[string]time.Time{}
	total := *n * len(delays)
	done := make(chan struct{})
	k, err := acemq.Consume(ctx, c, q, func(_ context.Context, m *acemq.Message[string]) acemq.Decision {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		at, ok := due[m.Payload]
		if !ok {
			return acemq.Accept()
		}
		delete(due, m.Payload)
		d, _ := time.ParseDuration(strings.SplitN(m.Payload, "/", 2)[0])
		late[d] = append(late[d], now.Sub(at))
		total--
		if total == 0 {
			close(done)
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer k.Close(ctx)
	for _, d := range delays {
		for i := range *n {
			tag := fmt.Sprintf("%v/%d", d, i)
			at := time.Now().Add(d)
			mu.Lock()
			due[tag] = at
			mu.Unlock()
			if err := schedule.At(ctx, c, "", q, tag, at); err != nil {
				log.Fatal(err)
			}
		}
	}
	<-done
	fmt.Printf("%-6s %8s %8s %8s  (arrival − due; negative = early), %d per delay, %s\n", "delay", "min", "median", "max", *n, c.Health(context.Background()).Transport)
	for _, d := range delays {
		l := late[d]
		slices.Sort(l)
		fmt.Printf("%-6v %8v %8v %8v\n", d, l[0].Round(time.Millisecond), l[len(l)/2].Round(time.Millisecond), l[len(l)-1].Round(time.Millisecond))
	}
}
