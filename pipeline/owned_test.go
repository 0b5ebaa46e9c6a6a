package pipeline

import "testing"

// A hop copies no header the broker writes: the x-death family, the
// stream offset, and both of a quorum queue's counts (x-acquired-count is
// RabbitMQ 4.3's and memory://'s), which describe the delivery they came
// with, not the copy.
func TestAHopLeavesTheBrokersHeadersBehind(t *testing.T) {
	for _, h := range []string{"x-death", "x-first-death-reason", "x-last-death-queue", "x-stream-offset", "x-delivery-count", "x-acquired-count"} {
		if !brokerOwned(h) {
			t.Errorf("%s would be copied onto a hop", h)
		}
	}
	if brokerOwned("x-acemq-id") {
		t.Error("x-acemq-id would be left off a hop")
	}
}
