module github.com/acemq-go/acemq/sqlstore

go 1.26.0
