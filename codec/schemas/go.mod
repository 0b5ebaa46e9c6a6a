module github.com/acemq-go/acemq/codec/schemas

go 1.26.0

require github.com/acemq-go/acemq/sqlstore v0.10.0
