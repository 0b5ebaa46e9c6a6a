package avro_test

import (
	"context"
	"fmt"

	"github.com/acemq-go/acemq/codec/avro"
	"github.com/acemq-go/acemq/codec/schemas"
)

func ExampleRegistered() {
	ctx := context.Background()
	registry := schemas.NewMemory()
	writer, err := avro.Registered(ctx, registry, "orders",
		`{"type":"record","name":"Order","fields":[{"name":"orderId","type":"string"}]}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := writer.Encode(map[string]any{"orderId": "o-1"})
	fmt.Printf("%s % x\n", writer.ContentType(), body[:5]) // 00 + schema id 1

	// A reader with a newer schema: the missing field takes its default.
	reader, _ := avro.RegistryReader(registry, avro.ReaderSchema(
		`{"type":"record","name":"Order","fields":[{"name":"orderId","type":"string"},{"name":"currency","type":"string","default":"GBP"}]}`))
	var order map[string]any
	if err := reader.Decode(writer.ContentType(), body, &order); err != nil {
		fmt.Println(err)
	}
	fmt.Println(order["orderId"], order["currency"])
	// Output:
	// application/vnd.acemq.avro 00 00 00 00 01
	// o-1 GBP
}

func ExampleNew() {
	codec, err := avro.New(`{"type":"record","name":"Order","fields":[{"name":"orderId","type":"string"},{"name":"total","type":"int"}]}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := codec.Encode(map[string]any{"orderId": "o-1", "total": 1250})
	fmt.Printf("%s % x\n", codec.ContentType(), body)
	// Output: avro/binary 06 6f 2d 31 c4 13
}
