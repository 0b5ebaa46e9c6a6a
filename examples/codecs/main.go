// Command codecs publishes orders in one format, Avro with the schema id
// in the body (application/vnd.acemq.avro), and consumes them three ways
// from one fanout exchange:
//
//   - billing reads them into a Go struct with the same schema;
//   - audit reads them with a composite that also reads XML, YAML, TOML,
//     Protobuf and JSON, into a map (the writer's record as written);
//   - a newer shipping service holds a newer schema with a currency field
//     the publisher does not write, and reads every order resolved onto
//     it: the currency arrives as the schema's default.
//
// It runs on the in-process broker with an in-memory schema registry;
// -url runs it against RabbitMQ. It exits 0 only if every order arrives
// at every consumer as expected.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/codec/avro"
	"github.com/acemq-go/acemq/codec/protobuf"
	"github.com/acemq-go/acemq/codec/schemas"
	"github.com/acemq-go/acemq/codec/toml"
	"github.com/acemq-go/acemq/codec/xml"
	"github.com/acemq-go/acemq/codec/yaml"
)

const orderSchema = `{"type":"record","name":"Order","namespace":"example","fields":[
  {"name":"orderId","type":"string"},{"name":"total","type":"long"}]}`

// The shipping service's newer schema: a field the publisher does not
// write yet, with a default.
const shippingSchema = `{"type":"record","name":"Order","namespace":"example","fields":[
  {"name":"orderId","type":"string"},{"name":"total","type":"long"},
  {"name":"currency","type":"string","default":"GBP"}]}`

type order struct {
	ID    string `avro:"orderId"`
	Total int64  `avro:"total"`
}

type shippingOrder struct {
	ID       string `avro:"orderId"`
	Total    int64  `avro:"total"`
	Currency string `avro:"currency"`
}

func main() {
	url := flag.String("url", "memory://example-codecs", "broker URL (memory://name or amqp://…)")
	flag.Parse()
	if err := run(*url); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
}

func run(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	registry := schemas.NewMemory(schemas.WithChecker(avro.Format, avro.Backward))
	publisherCodec, err := avro.Registered(ctx, registry, "example.orders", orderSchema)
	if err != nil {
		return err
	}
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())

	suffix := fmt.Sprint(time.Now().UnixNano())
	exchange := "example.orders." + suffix
	queues := map[string]string{}
	topo := acemq.NewTopology().Exchange(exchange, acemq.Fanout, acemq.ExchangeOptions{})
	for _, name := range []string{"billing", "audit", "shipping"} {
		q := "example." + name + "." + suffix
		queues[name] = q
		topo = topo.Queue(q, acemq.QueueOptions{Type: acemq.Classic}).DeadLetters(q).Bind(q, exchange, "")
	}
	if err := c.Apply(ctx, topo); err != nil {
		return err
	}
	defer func() {
		for _, q := range queues {
			for _, name := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
				_, _ = c.DeleteQueue(context.Background(), name)
			}
		}
	}()

	billing := make(chan order, 8)
	k1, err := acemq.Consume(ctx, c, queues["billing"], func(_ context.Context, m *acemq.Message[order]) acemq.Decision {
		billing <- m.Payload
		return acemq.Accept()
	}, acemq.ConsumerConfig{Codec: publisherCodec})
	if err != nil {
		return err
	}
	defer k1.Close(context.Background())

	avroReader, err := avro.RegistryReader(registry)
	if err != nil {
		return err
	}
	everything := acemq.Composite(avroReader, xml.New(), yaml.New(), toml.New(), protobuf.New(), acemq.JSON())
	audit := make(chan map[string]any, 8)
	k2, err := acemq.Consume(ctx, c, queues["audit"], func(_ context.Context, m *acemq.Message[map[string]any]) acemq.Decision {
		audit <- m.Payload
		return acemq.Accept()
	}, acemq.ConsumerConfig{Codec: everything})
	if err != nil {
		return err
	}
	defer k2.Close(context.Background())

	resolving, err := avro.RegistryReader(registry, avro.ReaderSchema(shippingSchema))
	if err != nil {
		return err
	}
	shipping := make(chan shippingOrder, 8)
	k3, err := acemq.Consume(ctx, c, queues["shipping"], func(_ context.Context, m *acemq.Message[shippingOrder]) acemq.Decision {
		shipping <- m.Payload
		return acemq.Accept()
	}, acemq.ConsumerConfig{Codec: resolving})
	if err != nil {
		return err
	}
	defer k3.Close(context.Background())

	pub := acemq.NewPublisher[order](c, exchange, "", acemq.PublisherConfig{Codec: publisherCodec})
	sent := []order{{"o-1", 1250}, {"o-2", 990}, {"o-3", 4200}}
	for _, o := range sent {
		if _, err := pub.Send(ctx, o); err != nil {
			return err
		}
	}
	fmt.Printf("published %d orders as %s\n", len(sent), publisherCodec.ContentType())

	for _, want := range sent {
		var b order
		var a map[string]any
		var s shippingOrder
		select {
		case b = <-billing:
		case <-ctx.Done():
			return errors.New("billing did not receive every order")
		}
		select {
		case a = <-audit:
		case <-ctx.Done():
			return errors.New("audit did not receive every order")
		}
		select {
		case s = <-shipping:
		case <-ctx.Done():
			return errors.New("shipping did not receive every order")
		}
		if b != want {
			return fmt.Errorf("billing read %+v, want %+v", b, want)
		}
		if a["orderId"] != want.ID || a["total"] != want.Total || len(a) != 2 {
			return fmt.Errorf("audit read %v, want the writer's record %+v", a, want)
		}
		if s != (shippingOrder{want.ID, want.Total, "GBP"}) {
			return fmt.Errorf("shipping read %+v, want %+v with currency GBP from its schema", s, want)
		}
		fmt.Printf("%s: billing %+v; audit %v; shipping %+v\n", want.ID, b, a, s)
	}
	fmt.Println("every order read three ways: OK")
	return nil
}
