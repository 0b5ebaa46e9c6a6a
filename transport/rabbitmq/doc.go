// Package rabbitmq is the AceMQ transport for RabbitMQ (AMQP 0-9-1), built on
// github.com/rabbitmq/amqp091-go.
//
// It registers itself for the amqp and amqps URL schemes. Like every
// transport it only moves bytes and reports what the broker said: it never
// retries, dead-letters or recovers. A lost connection closes Done at once,
// answers every pending confirm Lost, and leaves recovery to the engine,
// which dials again through Driver.Dial.
//
// Publishers run on a connection this package owns from handshake to
// close (own.go: its own AMQP 0-9-1 handshake, heartbeats, channels,
// confirms, returns, blocked notices and closes); channels for
// declarations, consuming and settling run on an amqp091-go connection,
// through its public API only. The URL parameter frames=amqp091 leaves
// publishing and confirms to amqp091-go as well. The URL parameter
// coalesce=off writes every publish straight to the socket (hold.go).
//
// Every goroutine this package starts ends when the connection or channel
// it serves ends.
//
// The manual's page on the design (the transport): https://github.com/acemq-go/acemq/blob/main/docs/design.md
package rabbitmq
