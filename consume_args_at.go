package acemq

import "github.com/acemq-go/acemq/transport"

// ConsumerArgsAt sets basic.consume arguments computed afresh on every
// subscribe: the first one and each one after a recovery. A stream reader
// uses it to resume at its own position (x-stream-offset) rather than where
// it first started. f runs on the goroutine that subscribes, never
// concurrently with itself, and must not block; it overrides ConsumerArgs.
func ConsumerArgsAt(f func() transport.Table) ConsumerOption {
	return func(c *consumerConfig) { c.argsAt = f }
}

// ConsumerOnStream marks the consumer as reading a stream, where RabbitMQ
// has no nack or reject (it closes the connection with 540): wherever the
// engine would hand a delivery back (a drain, a set-aside that failed) it
// acks instead, which on a stream only returns credit. The reader keeps its
// own position, so nothing is lost; the stream package sets this, and a
// consumer of a queue its Conn declared as a stream (AsStream) gets it
// without asking.
func ConsumerOnStream() ConsumerOption { return func(c *consumerConfig) { c.stream = true } }
