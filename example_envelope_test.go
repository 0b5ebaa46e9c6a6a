package acemq_test

import (
	"errors"
	"fmt"

	"github.com/acemq-go/acemq"
)

func ExampleNewEnvelope() {
	e := acemq.NewEnvelope()
	e.Type = "order.placed"

	fmt.Println("id length:", len(e.ID))
	fmt.Println("correlation is the id:", e.CorrelationID == e.ID)
	fmt.Println("version:", e.Version, "attempt:", e.Attempt)
	fmt.Println("first seen known:", !e.FirstSeen.IsZero())
	fmt.Println("valid:", e.Validate() == nil)
	// Output:
	// id length: 36
	// correlation is the id: true
	// version: 1 attempt: 1
	// first seen known: true
	// valid: true
}

func ExampleEnvelope_WithHeader() {
	e, err := acemq.NewEnvelope().WithHeader("x-yourcompany-tenant", "acme")
	fmt.Println(err)
	tenant, _ := e.Header("x-yourcompany-tenant")
	fmt.Println(tenant)

	_, err = e.WithHeader("x-acemq-tenant", "acme")
	fmt.Println(err)
	var reserved *acemq.ReservedHeaderError
	fmt.Println(errors.As(err, &reserved), reserved.Name)
	// Output:
	// <nil>
	// acme
	// acemq: header "x-acemq-tenant" is in the reserved "x-acemq-" namespace and would be dropped on consume; use a namespace of your own, such as x-yourcompany-
	// true x-acemq-tenant
}
