// Package rpc is request/reply over AceMQ queues (behaviour §7.3, contract
// §1.5 and §3.10).
//
// A Requester owns one private reply queue, acemq.reply.{uuid} (classic,
// exclusive, auto-delete, non-durable), declared through Conn.Apply so a
// recovery declares it again, and one consumer on it. Request publishes a
// request with a fresh correlation id and the reply address written both
// as the AMQP reply-to property and the acemq-reply-to header, then waits
// for the reply whose envelope correlation (x-acemq-correlation) matches.
//
// Respond runs a handler for requests arriving on a queue and publishes its
// answer, or its error, to the address the request carries.
//
// The manual's page on request and reply: https://github.com/acemq-go/acemq/blob/main/docs/request-reply.md
package rpc
