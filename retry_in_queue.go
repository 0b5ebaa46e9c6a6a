package acemq

import "time"

// The consumer side of a retry whose wait the queue holds (RetryWaits,
// RabbitMQ 4.3's delayed retry): the delivery goes back to the queue with
// basic.reject (requeue), which RabbitMQ counts as a failed delivery
// (x-delivery-count + 1) and holds for min(min × delivery count, max); no
// copy is written.

// withBrokerAttempts makes the envelope's attempt count the broker's
// returns on a consumer whose waits the queue holds: a retry there is the
// same message handed back, so its x-acemq-attempt header never changes,
// and the broker's x-delivery-count says how many deliveries failed before
// this one (a retry, or a delivery lost with its channel). Elsewhere the
// envelope is returned unchanged.
func (k *consumerCore) withBrokerAttempts(dv *delivery, env Envelope) Envelope {
	if !k.waitsInQueue {
		return env
	}
	if n := failedDeliveries(dv.d.Headers); n > 0 {
		env.Attempt += n
	}
	return env
}

// retryInQueue reports the retry and hands the delivery back to the queue
// for the broker to hold.
func (k *consumerCore) retryInQueue(dv *delivery, env Envelope, cause error, handled bool, dur time.Duration) {
	wait := k.policy.inQueueWait(failedDeliveries(dv.d.Headers) + 1)
	k.report(dv, Settlement{Queue: k.queue, Envelope: env, Outcome: ConsumeRetried, Target: k.queue, Reason: errText(cause), RetryDelay: wait, InBroker: true, Handled: handled, HandlerDuration: dur})
	if dv.att.alive() {
		if err := dv.att.ch.Reject(dv.d.DeliveryTag, true); err != nil {
			k.env.logger.Debug("acemq: a retry's reject did not reach the broker; it will redeliver", "queue", k.queue, "error", err)
		}
	}
	k.release(dv)
}
