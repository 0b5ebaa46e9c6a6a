package codectest

import "fmt"

// Order is the payload the codec benchmarks and round-trip tests share:
// SampleOrder's JSON form is about 1 KiB. Its tags serve every format.
type Order struct {
	ID       string   `json:"orderId" xml:"orderId" yaml:"orderId" toml:"orderId" avro:"orderId"`
	Customer string   `json:"customer" xml:"customer" yaml:"customer" toml:"customer" avro:"customer"`
	Total    int64    `json:"total" xml:"total" yaml:"total" toml:"total" avro:"total"`
	Currency string   `json:"currency" xml:"currency" yaml:"currency" toml:"currency" avro:"currency"`
	Lines    []Line   `json:"lines" xml:"lines" yaml:"lines" toml:"lines" avro:"lines"`
	Tags     []string `json:"tags" xml:"tags" yaml:"tags" toml:"tags" avro:"tags"`
	Note     string   `json:"note" xml:"note" yaml:"note" toml:"note" avro:"note"`
}

// Line is one order line.
type Line struct {
	SKU      string `json:"sku" xml:"sku" yaml:"sku" toml:"sku" avro:"sku"`
	Quantity int32  `json:"quantity" xml:"quantity" yaml:"quantity" toml:"quantity" avro:"quantity"`
	Price    int64  `json:"price" xml:"price" yaml:"price" toml:"price" avro:"price"`
}

// OrderAvroSchema is Order's Avro schema.
const OrderAvroSchema = `{"type":"record","name":"Order","namespace":"org.acemq.test","fields":[
{"name":"orderId","type":"string"},{"name":"customer","type":"string"},{"name":"total","type":"long"},
{"name":"currency","type":"string"},
{"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
{"name":"sku","type":"string"},{"name":"quantity","type":"int"},{"name":"price","type":"long"}]}}},
{"name":"tags","type":{"type":"array","items":"string"}},{"name":"note","type":"string"}]}`

// SampleOrder returns an order whose JSON encoding is about 1 KiB.
func SampleOrder() Order {
	o := Order{ID: "o-20260101-000042", Customer: "c-7781 Ada Lovelace", Currency: "GBP",
		Tags: []string{"priority", "gift", "eu"},
		Note: "Leave with the neighbour at number 12 if nobody answers; the side gate is open."}
	for i := range 15 {
		l := Line{SKU: fmt.Sprintf("SKU-%05d-BLUE-XL", 1000+i), Quantity: int32(i%3 + 1), Price: int64(499 + 100*i)}
		o.Lines = append(o.Lines, l)
		o.Total += int64(l.Quantity) * l.Price
	}
	return o
}
