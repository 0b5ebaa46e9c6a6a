package yaml_test

import (
	"fmt"

	"github.com/acemq-go/acemq/codec/yaml"
)

func ExampleNew() {
	codec := yaml.New()
	body, _ := codec.Encode(map[string]any{"orderId": "o-1", "total": 1250})
	fmt.Print(string(body))
	var back map[string]any
	_ = codec.Decode(codec.ContentType(), body, &back)
	fmt.Println(back["total"])
	// Output:
	// orderId: o-1
	// total: 1250
	// 1250
}
