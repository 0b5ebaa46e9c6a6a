package acemq

// Publish outcome words (contract §5.2).
const (
	OutcomeConfirmed  = "confirmed"
	OutcomePublished  = "published"
	OutcomeUnroutable = "unroutable"
	OutcomeRefused    = "refused"
	OutcomeFailed     = "failed"
)
