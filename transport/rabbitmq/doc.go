// Package rabbitmq is the AceMQ transport for RabbitMQ (AMQP 0-9-1), built on
// github.com/rabbitmq/amqp091-go.
//
// It registers itself for the amqp and amqps URL schemes. Like every
// transport it only moves bytes and reports what the broker said: it never
// retries, dead-letters or recovers. A lost connection closes Done at once,
// answers every pending confirm Lost, and leaves recovery to the engine,
// which dials again through Driver.Dial.
//
// Every goroutine this package starts ends when the connection or channel
// it serves ends.
package rabbitmq
