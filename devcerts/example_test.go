package devcerts_test

import (
	"fmt"

	"github.com/acemq-go/acemq/devcerts"
	"github.com/acemq-go/acemq/security"
)

// Generate makes a CA and the broker and client certificates it signs,
// each marked as a development certificate that no AceMQ client trusts
// unless told to.
func ExampleGenerate() {
	set, err := devcerts.Generate(devcerts.Options{Hosts: []string{"localhost"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(set.Broker.Cert.Subject.CommonName, set.Client.Cert.Subject.CommonName)
	fmt.Println(security.IsDevelopmentCertificate(set.Broker.Cert))
	// Output:
	// localhost acemq-client
	// true
}
