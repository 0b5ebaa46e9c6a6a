package main

import (
	"bytes"
	"testing"
)

// FuzzLoadTopology reads arbitrary bytes as a topology file: a validated
// Topology or an error sentence, never a panic.
func FuzzLoadTopology(f *testing.F) {
	f.Add([]byte("exchanges:\n  - {name: orders, type: topic}\nqueues:\n  - name: orders.new\n    deadLetters: true\n    retry: {attempts: 3, initial: 1s, max: 1m}\nbindings:\n  - {queue: orders.new, exchange: orders, key: \"order.*\"}\n"))
	f.Add([]byte("queues:\n  - {name: q, type: classic, deliveryLimit: 5, retry: {attempts: 2, delay: 30s, brokerFrom: 30s}}\n"))
	f.Add([]byte("queues: [{name: ''}]"))
	f.Add([]byte("a: &a [*a, *a]"))
	f.Add([]byte("exchanges: {name: x}"))
	f.Add([]byte("queues:\n  - name: q\n    retry: {attempts: -1, delay: -1s}\n"))
	f.Add([]byte{0xff, 0xfe, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		top, err := loadTopology("-", bytes.NewReader(data))
		if err != nil {
			if top != nil {
				t.Fatalf("a topology and an error: %v", err)
			}
			return
		}
		_ = top.Describe()
		_ = top.Declarations()
	})
}
