// Package rabbitmq is the AceMQ transport for RabbitMQ (AMQP 0-9-1), built on
// github.com/rabbitmq/amqp091-go.
//
// It registers itself for the amqp and amqps URL schemes. Like every
// transport it only moves bytes and reports what the broker said: it never
// retries, dead-letters or recovers. A lost connection closes Done at once,
// answers every pending confirm Lost, and leaves recovery to the engine,
// which dials again through Driver.Dial.
//
// amqp091-go dials, opens and closes channels, consumes and reads every
// frame; publishes are encoded and written by this package and their
// confirms read by it (native.go), unless the URL says frames=amqp091,
// which leaves publishing and confirms to amqp091-go. The URL parameter
// coalesce=off writes every publish straight to the socket (hold.go).
//
// Every goroutine this package starts ends when the connection or channel
// it serves ends.
//
// The manual's page on the design (the transport): https://github.com/acemq-go/acemq/blob/main/docs/design.md
package rabbitmq
