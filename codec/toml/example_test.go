package toml_test

import (
	"fmt"

	"github.com/acemq-go/acemq/codec/toml"
)

func ExampleNew() {
	codec := toml.New()
	body, _ := codec.Encode(map[string]any{"orderId": "o-1"})
	fmt.Print(string(body))
	_, err := codec.Encode([]string{"a list"})
	fmt.Println(err != nil)
	// Output:
	// orderId = 'o-1'
	// true
}
