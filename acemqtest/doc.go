// Package acemqtest tests a service that uses AceMQ in virtual time: its
// real topology, consumers, publishers, outbox relay, scheduler and sagas
// on an in-process broker, with minutes of retry waits, an hour's
// scheduled message or a saga's lease passing in milliseconds.
//
// A test runs in a testing/synctest bubble (Run makes one), where every
// clock the library reads is the bubble's fake clock and moves only when
// every goroutine is blocked. Start gives the service a Conn on a broker
// of its own; Settle waits until nothing is in flight anywhere, letting
// time pass through each wait in order; Expect checks what happened to the
// messages (published, consumed with each decision, retried, dead-lettered,
// parked, scheduled, replied) and says what did happen when it is not
// what the test expected. Broker gives the in-process broker's fault
// hooks; Respond answers requests the service makes.
//
// Inside the bubble nothing may wait on the network (a goroutine reading a
// socket keeps the clock from moving): use memory:// and SQLite, a
// polling outbox relay rather than PostgreSQL's LISTEN, and fakes for the
// service's other network calls. Objects holding channels or timers must
// not pass from one bubble to another.
//
// The manual's page: https://github.com/acemq-go/acemq/blob/main/docs/testing.md
package acemqtest
