package rabbitmq

import (
	"context"
	"net"
	"reflect"
	"testing"

	"github.com/acemq-go/acemq/transport"
)

func TestProbeAddrsUseTheSchemesDefaultPort(t *testing.T) {
	for _, tt := range []struct {
		cfg  transport.Config
		want []string
	}{
		{transport.Config{URL: "amqp://u:p@broker/"}, []string{"broker:5672"}},
		{transport.Config{URL: "amqps://broker/"}, []string{"broker:5671"}},
		{transport.Config{URL: "amqp://broker:1234/"}, []string{"broker:1234"}},
		{transport.Config{URL: "amqp://broker/", Addresses: []string{"a:1", "b:2"}}, []string{"a:1", "b:2"}},
	} {
		if got := probeAddrs(tt.cfg); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("probeAddrs(%+v) = %v, want %v", tt.cfg, got, tt.want)
		}
	}
}

func TestProbeSeesAListenerAndNoListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if !(Driver{}).Probe(context.Background(), transport.Config{Addresses: []string{addr}}) {
		t.Fatal("Probe missed a listening port")
	}
	ln.Close()
	if (Driver{}).Probe(context.Background(), transport.Config{Addresses: []string{addr}}) {
		t.Fatal("Probe saw a closed port as listening")
	}
}
