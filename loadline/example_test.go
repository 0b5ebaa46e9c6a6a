package loadline_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/loadline"
)

// One sample line, fields in the contract's order; the reason appears
// only while the broker blocks the connection.
func ExampleSample_AppendJSON() {
	s := loadline.Sample{
		At: time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC), Elapsed: 90 * time.Second,
		Published: 9000, Confirmed: 8990, Consumed: 8950, PublishRate: 100.04, ConsumeRate: 99.46,
		Blocked: true, Reason: "low on memory",
	}
	fmt.Println(string(s.AppendJSON(nil)))
	// Output:
	// {"at":"2026-12-03T17:00:00.000Z","elapsedMs":90000,"blocked":true,"published":9000,"confirmed":8990,"consumed":8950,"failed":0,"publishRate":100,"consumeRate":99.5,"refused":0,"reason":"low on memory"}
}

// A service writes the standing-load line of its Conn to standard output
// every second until it stops, then a final line.
func ExampleRun() {
	ctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
	defer stop()
	c, err := acemq.Connect(ctx, "amqp://guest:guest@localhost:5672/", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())
	if err := loadline.Run(ctx, c, os.Stdout, loadline.DefaultInterval); err != nil {
		log.Print(err)
	}
}
