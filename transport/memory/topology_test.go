package memory

import (
	"strings"
	"testing"

	"github.com/acemq-go/acemq/transport"
)

func TestDefaultExchangeCannotBeDeclaredBoundOrDeleted(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	ops := map[string]func(transport.Channel) error{
		"declare": func(ch transport.Channel) error {
			return ch.DeclareExchange(bg, transport.ExchangeSpec{Name: "", Kind: transport.Direct})
		},
		"bind": func(ch transport.Channel) error {
			return ch.BindQueue(bg, transport.BindingSpec{Queue: "q", Exchange: "", RoutingKey: "k"})
		},
		"delete": func(ch transport.Channel) error { return ch.DeleteExchange(bg, "") },
	}
	for op, fn := range ops {
		t.Run(op, func(t *testing.T) {
			ch := chanT(t, c)
			wantCode(t, fn(ch), transport.CodeAccessRefused, "ACCESS_REFUSED - operation not permitted on the default exchange")
			waitDone(t, ch.Done())
		})
	}
}

func TestAmqPrefixIsReserved(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	err := chanT(t, c).DeclareExchange(bg, transport.ExchangeSpec{Name: "amq.mine", Kind: transport.Direct, Durable: true})
	wantCode(t, err, transport.CodeAccessRefused, "ACCESS_REFUSED - exchange name 'amq.mine' contains reserved prefix 'amq.*'")
	_, err = chanT(t, c).DeclareQueue(bg, transport.QueueSpec{Name: "amq.q", Durable: true})
	wantCode(t, err, transport.CodeAccessRefused, "")
	for _, x := range []string{"amq.direct", "amq.topic", "amq.fanout", "amq.headers"} {
		kind := transport.ExchangeKind(strings.TrimPrefix(x, "amq."))
		if err := chanT(t, c).DeclareExchange(bg, transport.ExchangeSpec{Name: x, Kind: kind, Passive: true}); err != nil {
			t.Errorf("%s is not pre-declared: %v", x, err)
		}
	}
}

func TestTransientNonExclusiveQueueIsRefusedAndClosesConnection(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	ch := chanT(t, c)
	_, err := ch.DeclareQueue(bg, transport.QueueSpec{Name: "transient"})
	e := wantCode(t, err, transport.CodeInternalError, "")
	if !e.Connection {
		t.Fatal("541 is not marked as a connection error")
	}
	waitDone(t, c.Done())
	wantCode(t, c.Err(), transport.CodeInternalError, "")
	if _, ok := b.QueueInfo("transient"); ok {
		t.Fatal("refused queue exists")
	}
	if b.Connections() != 0 {
		t.Fatalf("%d connections left", b.Connections())
	}
}

func TestInequivalentQueueTypeNamesBothTypes(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	ch := chanT(t, c)
	_, err := ch.DeclareQueue(bg, transport.QueueSpec{Name: "q", Durable: true, Args: transport.Table{"x-queue-type": "quorum"}})
	e := wantCode(t, err, transport.CodePreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': received 'quorum' but current is 'classic'")
	if e.Connection {
		t.Fatal("406 closed the connection")
	}
	waitDone(t, ch.Done())
	select {
	case <-c.Done():
		t.Fatal("a channel error closed the connection")
	default:
	}
}

func TestInequivalentDurableAndArgs(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true, Args: transport.Table{"x-max-length": int32(5)}})
	cases := []transport.QueueSpec{
		{Name: "q", Durable: true, AutoDelete: true, Args: transport.Table{"x-max-length": int32(5)}},
		{Name: "q", Durable: true},
		{Name: "q", Durable: true, Args: transport.Table{"x-max-length": "5"}},
	}
	for _, spec := range cases {
		_, err := chanT(t, c).DeclareQueue(bg, spec)
		wantCode(t, err, transport.CodePreconditionFailed, "")
	}
	// Unchecked arguments are ignored, as RabbitMQ ignores them.
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true, Args: transport.Table{"x-max-length": int64(5), "x-custom": 1}})
}

func TestStreamDeclarationIsValidated(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	for _, spec := range []transport.QueueSpec{
		{Name: "s1", Args: transport.Table{"x-queue-type": "stream"}},
		{Name: "s2", Durable: true, AutoDelete: true, Args: transport.Table{"x-queue-type": "stream"}},
		{Name: "s3", Durable: true, Args: transport.Table{"x-queue-type": "stream", "x-max-age": "7 days"}},
		{Name: "s4", Durable: true, Args: transport.Table{"x-queue-type": "stream", "x-max-length-bytes": "big"}},
	} {
		_, err := chanT(t, c).DeclareQueue(bg, spec)
		wantCode(t, err, transport.CodePreconditionFailed, "")
	}
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "s", Durable: true, Args: transport.Table{"x-queue-type": "stream", "x-max-age": "7D"}})
}

func TestServerNamedQueue(t *testing.T) {
	b, name := newTestBroker(t)
	i, err := chanT(t, dialT(t, name, nil)).DeclareQueue(bg, transport.QueueSpec{Exclusive: true})
	if err != nil || !strings.HasPrefix(i.Name, "amq.gen-") {
		t.Fatalf("got %q, %v; want an amq.gen- name", i.Name, err)
	}
	info(t, b, i.Name)
}

func TestInequivalentArgTextMatchesRabbitMQ(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	_, err := chanT(t, c).DeclareQueue(bg, transport.QueueSpec{Name: "q", Durable: true, Args: transport.Table{"x-message-ttl": int32(5)}})
	wantCode(t, err, transport.CodePreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'q' in vhost '/': received the value '5' of type 'signedint' but current is none")
}

func TestSystemExchangesCannotBeDeleted(t *testing.T) {
	_, name := newTestBroker(t)
	err := chanT(t, dialT(t, name, nil)).DeleteExchange(bg, "amq.direct")
	wantCode(t, err, transport.CodeAccessRefused, "ACCESS_REFUSED - deletion of system exchange 'amq.direct' in vhost '/' not allowed")
}

func TestExchangeRedeclareWithOtherTypeIs406(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	if err := chanT(t, c).DeclareExchange(bg, transport.ExchangeSpec{Name: "x", Kind: transport.Direct, Durable: true}); err != nil {
		t.Fatal(err)
	}
	err := chanT(t, c).DeclareExchange(bg, transport.ExchangeSpec{Name: "x", Kind: transport.Fanout, Durable: true})
	wantCode(t, err, transport.CodePreconditionFailed, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'x' in vhost '/': received 'fanout' but current is 'direct'")
	err = chanT(t, c).DeclareExchange(bg, transport.ExchangeSpec{Name: "nope", Passive: true})
	wantCode(t, err, transport.CodeNotFound, "NOT_FOUND - no exchange 'nope' in vhost '/'")
}

func TestExclusiveQueueIsLockedForOtherConnections(t *testing.T) {
	_, name := newTestBroker(t)
	owner := dialT(t, name, nil)
	declareT(t, chanT(t, owner), transport.QueueSpec{Name: "mine", Exclusive: true})
	other := dialT(t, name, nil)
	for _, op := range []func(transport.Channel) error{
		func(ch transport.Channel) error {
			_, err := ch.DeclareQueue(bg, transport.QueueSpec{Name: "mine", Exclusive: true})
			return err
		},
		func(ch transport.Channel) error { _, err := ch.PurgeQueue(bg, "mine"); return err },
		func(ch transport.Channel) error { _, err := ch.DeleteQueue(bg, "mine"); return err },
		func(ch transport.Channel) error { _, _, err := ch.Get(bg, "mine"); return err },
		func(ch transport.Channel) error {
			return ch.BindQueue(bg, transport.BindingSpec{Queue: "mine", Exchange: "amq.direct"})
		},
	} {
		wantCode(t, op(chanT(t, other)), transport.CodeResourceLocked, "")
	}
}

func TestDeletePurgeAndUnbind(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	ch := chanT(t, c)
	declareT(t, ch, transport.QueueSpec{Name: "q", Durable: true})
	if err := ch.DeclareExchange(bg, transport.ExchangeSpec{Name: "x", Kind: transport.Direct, Durable: true}); err != nil {
		t.Fatal(err)
	}
	bs := transport.BindingSpec{Queue: "q", Exchange: "x", RoutingKey: "k"}
	if err := ch.BindQueue(bg, bs); err != nil {
		t.Fatal(err)
	}
	p := pubT(t, c)
	for range 3 {
		if o := publishOutcome(t, p, &transport.Message{Exchange: "x", RoutingKey: "k", Mandatory: true}); o != transport.Acked {
			t.Fatalf("bound publish: %v", o)
		}
	}
	if n, err := ch.PurgeQueue(bg, "q"); n != 3 || err != nil {
		t.Fatalf("purge: %d, %v; want 3", n, err)
	}
	if err := ch.UnbindQueue(bg, bs); err != nil {
		t.Fatal(err)
	}
	if o := publishOutcome(t, p, &transport.Message{Exchange: "x", RoutingKey: "k", Mandatory: true}); o != transport.Returned {
		t.Fatalf("publish after unbind: %v, want returned", o)
	}
	if o := publishOutcome(t, p, msgTo("q", "x")); o != transport.Acked {
		t.Fatal(o)
	}
	ds, err := chanT(t, c).Consume(bg, transport.ConsumeSpec{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, ds)
	if o := publishOutcome(t, p, msgTo("q", "y")); o != transport.Acked {
		t.Fatal(o)
	}
	eventually(t, "second delivery in flight", func() bool { return info(t, b, "q").Messages == 0 })
	if n, err := ch.DeleteQueue(bg, "q"); err != nil || n != 0 {
		t.Fatalf("delete: %d, %v; want 0 ready", n, err)
	}
	closedSoon(t, ds)
	if _, ok := b.QueueInfo("q"); ok {
		t.Fatal("deleted queue still there")
	}
	if n, err := ch.DeleteQueue(bg, "q"); err != nil || n != 0 {
		t.Fatalf("deleting a missing queue: %d, %v; want 0, nil", n, err)
	}
	if err := ch.DeleteExchange(bg, "x"); err != nil {
		t.Fatal(err)
	}
	err = p.Publish(bg, &transport.Message{Exchange: "x"}, func(transport.Confirmation) {})
	wantCode(t, err, transport.CodeNotFound, "NOT_FOUND - no exchange 'x' in vhost '/'")
}
