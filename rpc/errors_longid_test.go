package rpc_test

import (
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/rpc"
)

// A request id of 60,000 bytes (a requester may choose its own) made each
// error naming it a 60 KB line: the sentence shows its first 64 bytes and
// its length, and the ID field keeps it whole.
func TestALongRequestIDIsShortenedInTheErrorSentence(t *testing.T) {
	id := "req-" + strings.Repeat("x", 60000-4)
	for _, err := range []error{
		&rpc.TimeoutError{ID: id, CorrelationID: "c-1", Timeout: time.Second},
		&rpc.ResponderError{ID: id, CorrelationID: "c-1", Text: "no stock"},
	} {
		s := err.Error()
		if len(s) > 512 || !strings.Contains(s, id[:64]+"… (60000 bytes)") {
			t.Errorf("%T.Error() is %d bytes, want the id's first 64 bytes and its length: %.300q", err, len(s), s)
		}
	}
}
