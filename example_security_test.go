package acemq_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/devcerts"
	"github.com/acemq-go/acemq/security"
)

// A service that must use TLS says so; pointing it at a plaintext URL is
// then a ConfigurationError before anything dials, and the URL's password
// is masked in the sentence.
func ExampleConfig_tlsMode() {
	_, err := acemq.Connect(context.Background(), "amqp://app:s3cret@broker.internal:5672/", acemq.Config{TLSMode: security.ModeRequired})
	fmt.Println(err)
	// Output: acemq: option Config.TLSMode: TLS is required (security.ModeRequired) but the URL amqp://app:***@broker.internal:5672/ does not use TLS; connect to amqps:// on the broker's TLS port (5671 by default)
}

// A secret file (a mounted Kubernetes or Vault secret) is read on every
// dial, so a rotated password is used by the next reconnect without a
// restart. Credentials print their user only.
func ExampleConfig_credentialsProvider() {
	dir, err := os.MkdirTemp("", "acemq-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "rabbitmq-secret")
	if err := os.WriteFile(path, []byte("orders:s3cret\n"), 0o600); err != nil {
		fmt.Println(err)
		return
	}
	provider := security.File(path, "")
	creds, err := provider.Credentials(context.Background())
	fmt.Println(creds, err)

	c, err := acemq.Connect(context.Background(), "memory://example-credentials", acemq.Config{CredentialsProvider: provider, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(context.Background())
	fmt.Println(c)
	// Output:
	// user orders (password hidden) <nil>
	// acemq.Conn(memory memory://example-credentials, open)
}

// devcerts makes what a TLS test needs; every certificate says it is a
// development certificate, so clients refuse it unless told otherwise.
func Example_developmentCertificates() {
	set, err := devcerts.Generate(devcerts.Options{Hosts: []string{"localhost"}, Client: "orders"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(set.Broker.Cert.Subject.Organization[0])
	fmt.Println(set.Broker.Cert.DNSNames, set.Broker.Cert.IPAddresses)
	fmt.Println(security.IsDevelopmentCertificate(set.Client.Cert))
	// Output:
	// ACEMQ DEVELOPMENT ONLY - DO NOT TRUST
	// [localhost] [127.0.0.1 ::1]
	// true
}
