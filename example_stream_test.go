package acemq_test

import (
	"fmt"
	"time"

	"github.com/acemq-go/acemq"
)

// A stream keeps its messages for readers to replay; retention removes
// whole segments older than the max age.
func ExampleQueueOptions_stream() {
	t := acemq.NewTopology().
		Queue("orders.history", acemq.QueueOptions{Type: acemq.Stream, MaxAge: 36 * time.Hour, SegmentBytes: 64 << 20})
	fmt.Println(t.Validate())
	for _, d := range t.Declarations() {
		fmt.Println(d.Queue.Name, d.Queue.Durable, d.Queue.Args["x-max-age"], d.Queue.Args["x-stream-max-segment-size-bytes"])
	}
	// Output:
	// <nil>
	// orders.history true 36h 67108864
}
