module github.com/acemq-go/acemq

go 1.24

require (
	github.com/rabbitmq/amqp091-go v1.16.0
	go.uber.org/goleak v1.3.0
)
