// Package transporttest is the conformance suite every AceMQ transport must
// pass, in the manner of watermill's Pub/Sub tests: one set of behaviours,
// asserted against the in-process broker and against RabbitMQ alike, so
// "memory:// is no kinder than RabbitMQ" is tested rather than promised.
//
// The suite only asserts what holds on both brokers. It names every queue
// and exchange with a random suffix and uses exclusive queues (deleted with
// their connection) or deletes what it declares, so it can run against a
// shared broker.
//
// The manual's page on the design (writing a transport): https://github.com/acemq-go/acemq/blob/main/docs/design.md
package transporttest

import (
	"testing"

	"github.com/acemq-go/acemq/transport"
)

// Harness tells the suite how to reach the broker under test.
type Harness struct {
	// Dial opens a new connection to the broker. The suite closes every
	// connection it dials. Required.
	Dial func(t *testing.T) transport.Connection

	// DialWithOnBlocked opens a connection whose transport.Config.OnBlocked
	// is onBlocked. Nil makes the blocking subtest skip its notification
	// checks.
	DialWithOnBlocked func(t *testing.T, onBlocked func(active bool, reason string)) transport.Connection

	// Block raises a resource alarm with reason; Unblock clears it. Both
	// nil skips the blocking subtests.
	Block   func(t *testing.T, reason string)
	Unblock func(t *testing.T)

	// DropConnections forces every connection closed as a broker shutdown
	// does (320 CONNECTION_FORCED). Nil skips the subtest.
	DropConnections func(t *testing.T)

	// RabbitMQ4 says the broker is RabbitMQ 4.x, which answers two things
	// differently from RabbitMQ 3 (and from memory://, which keeps RabbitMQ
	// 3's stricter answer): it settles a nack or reject on a stream as an
	// ack (RabbitMQ 3 closes the connection with 540 NOT_IMPLEMENTED), and a
	// passive declare of a stream reports a message count (RabbitMQ 3: 0).
	RabbitMQ4 bool

	// CountsNacks says a quorum queue counts a basic.nack with requeue
	// toward x-delivery-count (and so its delivery limit), as RabbitMQ
	// 3.10 to 4.2 do. RabbitMQ 4.3 counts only basic.reject and a channel
	// or connection lost with the message unacked, and so does memory://.
	CountsNacks bool
	// AcquiredCount says a quorum queue writes x-acquired-count, the count
	// of every earlier delivery however it ended (RabbitMQ 4.3 and
	// memory://).
	AcquiredCount bool

	// QuorumReturnsBehind says a quorum queue puts a message returned by
	// basic.reject or basic.nack with requeue behind the messages ready in
	// the queue, as RabbitMQ 3.10 does (measured: reject 1 and then 0 of
	// 0..3, and basic.get answers 2, 3, 1, 0). RabbitMQ 4.3 and memory://
	// deliver returned messages first, in the order they came back.
	QuorumReturnsBehind bool
	// KeepsPublishedDeaths says dead-lettering counts on from an x-death
	// header a publisher set and keeps its x-first-death-*, as RabbitMQ
	// 3.x does (3.10.8 measured). RabbitMQ 4 (4.3.6 measured; 4.0 by the
	// maintainers' word, rabbitmq-server#11339) and memory:// keep the
	// death record apart from the headers: a published message has none.
	KeepsPublishedDeaths bool
	// ClassicSingleActiveCancelStalls says that cancelling the active
	// consumer of a classic single-active-consumer queue while it holds
	// unacked deliveries leaves the next consumer waiting, and the queue
	// process crashes at the next publish, as on RabbitMQ 3.10.8
	// (measured). The suite then asserts what a cancel does on quorum
	// queues only.
	ClassicSingleActiveCancelStalls bool
}

// Run runs every conformance subtest against the broker h reaches. Each
// subtest is independent and may run in parallel with other packages'
// use of the same broker.
func Run(t *testing.T, h Harness) {
	if h.Dial == nil {
		t.Fatal("transporttest: Harness.Dial is required")
	}
	s := &suite{h: h}
	for _, c := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"PublishIsConfirmed", s.publishIsConfirmed},
		{"MandatoryUnroutableIsReturnedNoRoute", s.mandatoryUnroutableIsReturned},
		{"NonMandatoryUnroutableIsAcked", s.nonMandatoryUnroutableIsAcked},
		{"RejectPublishFullQueueIsNacked", s.rejectPublishFullQueueIsNacked},
		{"PublishToMissingExchangeClosesChannelWith404", s.publishToMissingExchange},
		{"PublishOverFrameMaxIsRefusedBeforeWriting", s.publishOverFrameMaxIsRefused},
		{"PublishOfAShortStringOver255BytesIsRefusedBeforeWriting", s.publishOfALongShortStringIsRefused},
		{"PassiveDeclareOfMissingQueueIs404AndClosesChannel", s.passiveDeclareMissingQueue},
		{"InequivalentRedeclareIs406", s.inequivalentRedeclare},
		{"IntegerArgumentsCompareAcrossWidths", s.integerArgsCompareAcrossWidths},
		{"TTLExpiryDeadLettersWithConfiguredRoutingKey", s.ttlExpiryDeadLetters},
		{"RejectWithoutRequeueDeadLettersWithXDeath", s.rejectDeadLetters},
		{"PublishedDeathHeadersAreNotTheBrokersRecord", s.publishedDeathHeadersAreNotTheBrokersRecord},
		{"NackRequeueRedeliversAtHead", s.nackRequeueRedelivers},
		{"ReturnedMessagesGoWhereTheQueueTypePutsThem", s.returnedMessagesGoWhereTheQueueTypePutsThem},
		{"ReturnsAreCountedAsTheVersionCounts", s.returnsAreCountedAsTheVersionCounts},
		{"DeliveryLimitDeadLettersTheThirdCountedReturn", s.deliveryLimitDeadLettersTheThirdCountedReturn},
		{"PrefetchIsEnforcedAndChannelCloseRequeues", s.prefetchEnforced},
		{"GetReportsMessageCount", s.getReportsMessageCount},
		{"TopicWildcards", s.topicWildcards},
		{"FanoutReachesEveryBoundQueue", s.fanoutRouting},
		{"HeadersAllAndAny", s.headersRouting},
		{"ExclusiveQueueIsGoneAfterItsConnectionCloses", s.exclusiveQueueGone},
		{"ExclusiveQueueIsLockedToOtherConnections", s.exclusiveQueueLocked},
		{"UnknownDeliveryTagClosesChannelWith406", s.unknownDeliveryTag},
		{"CancelClosesDeliveriesAndKeepsUnacked", s.cancelKeepsUnacked},
		{"CancelledSubscriptionKeepsTheQueueOrder", s.cancelledSubscriptionKeepsTheQueueOrder},
		{"SingleActiveConsumerDeliversToTheFirstOnly", s.singleActiveConsumerDeliversToTheFirstOnly},
		{"SingleActiveConsumerCancelActivatesTheNextAtOnce", s.singleActiveConsumerCancelActivatesTheNextAtOnce},
		{"SingleActiveConsumerEndReturnsUnackedToTheNextInOrder", s.singleActiveConsumerEndReturnsUnackedToTheNextInOrder},
		{"SingleActiveConsumerHandsOverTwiceInOrder", s.singleActiveConsumerHandsOverTwiceInOrder},
		{"SingleActiveConsumerArgumentIsChecked", s.singleActiveConsumerArgumentIsChecked},
		{"SingleActiveConsumerIsCheckedOnRedeclare", s.singleActiveConsumerIsCheckedOnRedeclare},
		{"BlockHoldsConfirmsUntilUnblock", s.blockHoldsConfirms},
		{"DropConnectionsEndsWith320AndRequeues", s.dropConnections},
		{"StreamReadersAreIndependentWithOffsets", s.streamReadersAreIndependent},
		{"StreamPrefetchIsEnforcedAndAckOnlyReturnsCredit", s.streamPrefetchIsEnforced},
		{"StreamNackClosesTheConnectionWith540OrSettlesOnRabbitMQ4", s.streamNack},
		{"StreamConsumeWithoutPrefetchIs406", s.streamConsumeWithoutPrefetchIs406},
		{"ExclusiveStreamIsRefused", s.streamNonDurableIsRefused},
		{"StreamAttachByTimestamp", s.streamAttachByTimestamp},
		{"StreamGetIsRefusedWith540", s.streamGetIsRefused},
		{"StreamRetentionDropsWholeAgedSegments", s.streamRetention},
	} {
		t.Run(c.name, c.fn)
	}
}
