module github.com/acemq-go/acemq

go 1.24
