// Package acemq is reliable messaging over RabbitMQ (AMQP 0-9-1) for Go
// services, keeping the AceMQ family's wire contract, with an in-process
// broker (memory://name) that is no kinder than RabbitMQ so the same code
// runs in tests with nothing installed.
//
// Connect opens a Conn for an amqp://, amqps:// or memory:// URL; Conn.Apply
// declares a Topology; NewPublisher gives a typed Publisher whose Send
// returns once the broker confirmed the message; Consume runs a handler that
// returns a Decision (Accept, Retry, Reject, Park, InProgress) which the
// engine settles, retrying with a RetryPolicy and setting aside to {q}.dlq
// or {q}.parked with the reason. Settings are structs whose zero value works
// (Config, PublisherConfig, ConsumerConfig, SendOptions). Every failure has a
// type or a sentinel to branch on (PublishError, PublishingPausedError,
// ConfigurationError, DrainTimeoutError, ErrClosed). The patterns (outbox,
// idempotency, rpc, replay, ...) are packages over this one.
//
// The manual starts at
// https://github.com/acemq-go/acemq/blob/main/docs/getting-started.md; the
// guarantees are in
// https://github.com/acemq-go/acemq/blob/main/docs/guarantees.md.
package acemq
