// Package orderpb holds the generated Order message the protobuf codec is
// tested with.
package orderpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative order.proto
