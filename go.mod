module github.com/acemq-go/acemq

go 1.24

require go.uber.org/goleak v1.3.0
