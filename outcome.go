package acemq

// Outcome is how one publish or one delivery ended, in the contract's
// spelling (§5.2). Its text is what logs, metric labels (the outcome label
// of acemq.publish.total and acemq.consume.total) and span attributes
// carry, byte for byte; compare with the constants below, not with text.
type Outcome string

// Publish outcomes (contract §5.2): Sent.Outcome, PublishError.Outcome,
// PublishReport.Outcome.
const (
	// OutcomeConfirmed: the broker confirmed the message.
	OutcomeConfirmed Outcome = "confirmed"
	// OutcomePublished: written with publisher confirms off
	// (Config.NoPublisherConfirms); nothing says the broker has it.
	OutcomePublished Outcome = "published"
	// OutcomeUnroutable: a mandatory message reached no queue.
	OutcomeUnroutable Outcome = "unroutable"
	// OutcomeRefused: declined before anything was written (paused,
	// blocked, closed, or a header over the limits); safe to retry.
	OutcomeRefused Outcome = "refused"
	// OutcomeFailed: anything else; see PublishError.Sent for whether it
	// may have arrived.
	OutcomeFailed Outcome = "failed"
)

// Consume outcomes (contract §5.2): Settlement.Outcome, what the engine
// did with a delivery (never the handler's answer: a retry on the last
// attempt is dead_lettered).
const (
	// ConsumeAcked: handled and acknowledged.
	ConsumeAcked Outcome = "acked"
	// ConsumeRetried: a retry was scheduled (in the consumer or in the
	// broker's retry queue) and the delivery settled.
	ConsumeRetried Outcome = "retried"
	// ConsumeRejected: rejected to the queue's dead-letter queue.
	ConsumeRejected Outcome = "rejected"
	// ConsumeDeadLettered: its retries ran out; it is in the dead-letter
	// queue with the reason.
	ConsumeDeadLettered Outcome = "dead_lettered"
	// ConsumeParked: set aside in the parked queue with the reason.
	ConsumeParked Outcome = "parked"
	// ConsumeInProgress: the handler asked for more time; the delivery
	// goes back after the in-progress delay.
	ConsumeInProgress Outcome = "in_progress"
	// ConsumeReleased is the outcome of a Release decision: the message
	// went back to the broker unsettled, neither handled nor set aside.
	ConsumeReleased Outcome = "released"
)
