// Package idtext is how AceMQ shows a message id in an error string or a
// log line. An id is whatever the publisher chose, and x-acemq-id is an
// AMQP long string: a hostile or careless publisher can send an id of
// 60,000 bytes, which printed whole makes a 60 KB error line. Errors and
// log lines show its first Max bytes and its length; the full id stays in
// the error's fields and in the message.
package idtext

import (
	"strconv"
	"strings"
)

// Max is the most bytes of an id an error string or a log line shows. Ids
// the library makes (36 bytes) and the outbox's (at most 64) are shown
// whole.
const Max = 64

// Short returns id when it is at most Max bytes; otherwise its first Max
// bytes (cut back to whole UTF-8 characters) followed by "… (N bytes)",
// N being the id's length.
func Short(id string) string {
	if len(id) <= Max {
		return id
	}
	return strings.ToValidUTF8(id[:Max], "") + "… (" + strconv.Itoa(len(id)) + " bytes)"
}

// Quote is strconv.Quote of Short's cut, for an id that may not be UTF-8
// (the bytes are escaped, not dropped): the whole id quoted when it is at
// most Max bytes, else its first Max bytes quoted followed by
// "… (N bytes)".
func Quote(id string) string {
	if len(id) <= Max {
		return strconv.Quote(id)
	}
	return strconv.Quote(id[:Max]) + "… (" + strconv.Itoa(len(id)) + " bytes)"
}
