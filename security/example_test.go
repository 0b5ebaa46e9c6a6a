package security_test

import (
	"context"
	"fmt"
	"os"

	"github.com/acemq-go/acemq/security"
)

// A Provider is asked for the credentials on every dial, so a rotated
// secret needs no restart. Env reads the password from the environment
// each time.
func ExampleEnv() {
	os.Setenv("EXAMPLE_RABBITMQ_PASSWORD", "s3cret")
	defer os.Unsetenv("EXAMPLE_RABBITMQ_PASSWORD")
	p := security.Env("EXAMPLE_RABBITMQ_PASSWORD", "orders-service")
	creds, err := p.Credentials(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println(creds.User, len(creds.Password))
	// Output: orders-service 6
}
