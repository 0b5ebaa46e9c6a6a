package protobuf_test

import (
	"fmt"

	"github.com/acemq-go/acemq/codec/protobuf"
)

// A map travels as google.protobuf.Struct; a generated message is passed
// as it is (codec.Encode(&pb.Order{...})).
func ExampleNew() {
	codec := protobuf.New()
	body, _ := codec.Encode(map[string]any{"orderId": "o-1"})
	var back map[string]any
	_ = codec.Decode("application/x-protobuf", body, &back)
	fmt.Println(back["orderId"])
	// Output: o-1
}
