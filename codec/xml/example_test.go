package xml_test

import (
	"fmt"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/codec/xml"
)

// A consumer given this composite reads XML (both list shapes) and JSON.
func ExampleNew() {
	codec := acemq.Composite(xml.New(), acemq.JSON())
	var order map[string]any
	body := `<Order><orderId>o-1</orderId><tags><tags>a</tags><tags>b</tags></tags></Order>` // as Java writes it
	if err := codec.Decode("application/xml", []byte(body), &order); err != nil {
		fmt.Println(err)
	}
	fmt.Println(order["orderId"], order["tags"])
	// Output: o-1 [a b]
}
