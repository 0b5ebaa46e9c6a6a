// Command groups is the program of docs/groups.md: four competing
// consumers of one queue, run as a worker's main loop that drains them on
// SIGINT or SIGTERM.
package main

import (
	"context"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/group"
)

type Thumbnail struct {
	Image string `json:"image"`
}

func main() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	c, err := acemq.Connect(ctx, "memory://media", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Apply(ctx, acemq.NewTopology().Queue("thumbnails", acemq.QueueOptions{}).DeadLetters("thumbnails")); err != nil {
		log.Fatal(err)
	}

	const jobs = 20
	var done atomic.Int32
	g, err := group.Consume(ctx, c, "thumbnails", 4, func(ctx context.Context, m *acemq.Message[Thumbnail]) acemq.Decision {
		time.Sleep(10 * time.Millisecond) // the work
		if done.Add(1) == jobs {
			stop() // this program stops itself; a service waits for a signal
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Prefetch: 5}) // per member
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range g.Members() {
		fmt.Println("member", m.Tag()) // acemq-thumbnails-1 … -4
	}
	for i := range jobs {
		if _, err := c.Publish(ctx, "", "thumbnails", Thumbnail{Image: fmt.Sprintf("img-%d.png", i)}, acemq.SendOptions{}); err != nil {
			log.Fatal(err)
		}
	}

	// Blocks until ctx ends or SIGINT/SIGTERM, then drains the group and the
	// Conn under one 20 s deadline; an error means deliveries were left
	// unsettled (the broker has them back).
	if err := group.Run(ctx, 20*time.Second, g, c); err != nil {
		log.Fatal(err)
	}
	fmt.Println("thumbnails made:", done.Load())
}
