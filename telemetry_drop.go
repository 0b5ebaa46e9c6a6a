package acemq

import "context"

// acemq.consume.lost.on.drop counts, per queue, deliveries this process
// held when their channel or connection ended before it settled them: the
// broker gives each back and delivers it again, so this is what a
// connection drop costs in repeated handling (a settle that raced the drop
// may be counted too). A steady rise means the connection keeps dropping
// while messages are in flight.
const (
	lostOnDropName        = "acemq.consume.lost.on.drop"
	lostOnDropDescription = "Deliveries held when their channel or connection ended, so the broker redelivers them."
)

func (t *telemetry) deliveryLostOnDrop(queue string) {
	if !t.metering {
		return
	}
	o := t.opts(attrKey{kind: kindQueue, a: queue}, func() *attrOpts {
		return newAttrOpts(tagQueue.String(queue), tagTrans.String(t.transport))
	})
	t.lostOnDrop.Add(context.Background(), 1, o.add...)
}
