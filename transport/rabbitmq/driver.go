package rabbitmq

import "github.com/acemq-go/acemq/transport"

func init() {
	transport.Register("amqp", Driver{})
	transport.Register("amqps", Driver{})
}

// Driver dials RabbitMQ. The zero value is ready to use and safe for
// concurrent use; it holds no state.
type Driver struct{}

// Name returns "rabbitmq", the transport name used in metric tags.
func (Driver) Name() string { return "rabbitmq" }

// capabilities is sorted and spelled as the contract spells it.
var capabilities = [...]string{
	"DEAD_LETTER_NATIVE",
	"EXCHANGE_ROUTING",
	"HEADERS_ROUTING",
	"PRIORITY",
	"PUBLISHER_CONFIRMS",
	"QUORUM_QUEUES",
	"SINGLE_ACTIVE_CONSUMER",
	"STREAMS",
	"TOPIC_WILDCARDS",
	"TRANSACTIONS",
	"TTL_PER_MESSAGE",
}

// Capabilities lists, sorted, what RabbitMQ supports among the contract's
// capability names. The caller owns the returned slice.
func (Driver) Capabilities() []string {
	out := make([]string, len(capabilities))
	copy(out, capabilities[:])
	return out
}
