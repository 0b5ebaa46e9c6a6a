package schemas_test

import (
	"context"
	"fmt"

	"github.com/acemq-go/acemq/codec/schemas"
)

func ExampleMemory_Register() {
	ctx := context.Background()
	r := schemas.NewMemory()
	first, _ := r.Register(ctx, "orders", "avro", `"string"`)
	again, _ := r.Register(ctx, "orders", "avro", `"string"`)
	next, _ := r.Register(ctx, "orders", "avro", `"long"`)
	fmt.Println(first.ID, again.ID, first.Version, next.ID, next.Version)
	// Output: 1 1 1 2 2
}
