// Package memory is the in-process broker behind memory://name URLs.
//
// It is a product feature, not a test double: it keeps RabbitMQ's rules so
// that code tested against it behaves the same on the real broker. It routes
// through the default, direct, topic, fanout and headers exchanges; confirms,
// nacks and returns publishes; enforces per-consumer prefetch; requeues to
// the head with Redelivered set; honours x-message-ttl, x-max-length with
// x-overflow, x-dead-letter-exchange and x-dead-letter-routing-key, writing
// RabbitMQ's x-death headers, and x-dead-letter-strategy at-least-once on
// a quorum queue with x-overflow reject-publish (a dead letter stays on its
// queue until its targets took it; SetDeadLetterRetry); and answers with RabbitMQ's reply codes and
// texts (404, 405, 406, 403, 541).
//
// A quorum queue (x-queue-type=quorum) counts deliveries as RabbitMQ 4.3
// does, the newest rules and the strictest for a client: x-acquired-count
// counts every earlier delivery; x-delivery-count counts only the returns
// that are failures, a basic.reject with requeue and a channel or
// connection lost with the message unacked, never a basic.nack (RabbitMQ
// 3.10 to 4.2 count that too). A counted return over the queue's
// x-delivery-limit (20 when absent, as on RabbitMQ 4; -1 for none)
// dead-letters the message with reason delivery_limit, or drops it
// without a dead-letter exchange.
//
// Like RabbitMQ 4.x, it refuses transient (non-durable) queues that are not
// exclusive: the declaration fails with 541 INTERNAL_ERROR and closes the
// whole connection. Priorities are not supported.
//
// Streams (x-queue-type=stream) are retained logs read from any position,
// with RabbitMQ's rules: durable only; a consumer needs a prefetch and
// starts at its x-stream-offset argument (first, last, next, an int64
// offset or a timestamp); every delivery carries its x-stream-offset
// header; an ack only returns credit; a nack or reject, and basic.get, end
// the connection with 540 NOT_IMPLEMENTED (RabbitMQ 3's answer: RabbitMQ 4
// settles a nack on a stream as an ack; where the versions differ this broker
// keeps the stricter answer, so code that passes here works on both); retention by x-max-age and
// x-max-length-bytes removes whole segments (x-stream-max-segment-size-bytes)
// when a new segment starts, never the one being written. Offsets here are
// contiguous; RabbitMQ's may skip a few where a segment starts.
//
// Brokers live in a process-wide registry keyed by name, which is part of
// the scheme: every memory://orders in one process reaches the same broker,
// whose state lasts until Delete or the end of the process. Nothing is
// durable across process restarts.
//
// A Broker also offers fault injection for tests of the code above it:
// Block, Unblock, DropConnections, NackNext, StopConfirming and
// ResumeConfirming. Block is RabbitMQ's resource alarm, with its timing: a
// connection is told it is blocked only when it publishes during the
// alarm, and that publish is held unconfirmed until Unblock.
//
// Deliveries share the broker's copy of the body: treat Delivery.Body as
// read-only. Headers are copied per delivery.
//
// x-single-active-consumer is kept as RabbitMQ keeps it on classic and
// quorum queues: only the first consumer still subscribed receives; a
// basic.cancel makes the next one active at once, and a channel or
// connection that ends returns what it held, in order and redelivered,
// to the next one before anything else.
//
// Not implemented: x-expires, x-max-length-bytes (outside streams),
// per-message TTL, priorities (x-max-priority, and consumer priorities
// with x-priority), transactions and multiple=true acknowledgements (the
// seam has none).
//
// Design for throughput: one mutex per queue over a ring buffer; routing
// under a read lock on the topology; a pump goroutine per consumer and a
// confirmer goroutine per confirming publisher, both fed in batches; no
// goroutine, timer or channel per message (one timer per queue with a
// TTL); message copies carved from per-publisher slabs; confirm callbacks
// run without any broker lock held.
//
// The manual's page on getting started (the in-process broker): https://github.com/acemq-go/acemq/blob/main/docs/getting-started.md
package memory
