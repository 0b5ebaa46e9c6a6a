package acemq_test

import (
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
)

// TestAPulledNoPullerTookIsRefusedNotPanicked: replay.Browse hands its
// visit function Pulled values that no Puller took; settling one used to
// dereference a nil Puller.
func TestAPulledNoPullerTookIsRefusedNotPanicked(t *testing.T) {
	m := &acemq.Pulled{Envelope: acemq.Envelope{ID: "m-1"}}
	for name, settle := range map[string]func() error{
		"Ack":  m.Ack,
		"Nack": func() error { return m.Nack(true) },
	} {
		err := settle()
		if err == nil || !strings.Contains(err.Error(), "not taken by a Puller") {
			t.Errorf("%s on a Pulled no Puller took = %v, want the 'not taken by a Puller' error", name, err)
		}
	}
}
