package acemq_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/security"
)

// Mutual TLS with certificates made by `acemq certs` (docs/security.md).
// It needs a broker with a TLS listener, so it is compiled, not run.
func ExampleConfig_clientCertificate() {
	ctx := context.Background()

	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile("certs/ca.pem")
	pool.AppendCertsFromPEM(caPEM)
	c, err := acemq.Connect(ctx, "amqps://localhost:5671/", acemq.Config{
		TLS:                     &tls.Config{RootCAs: pool},
		ClientCertificate:       security.CertificateFiles("certs/client.pem", "certs/client.key"),
		ExternalAuth:            true, // log in as the certificate's common name
		DevelopmentCertificates: true, // these came from `acemq certs`: development only
	})

	if err == nil {
		defer c.Close(ctx)
	}
}
