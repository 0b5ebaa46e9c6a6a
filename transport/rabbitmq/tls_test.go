package rabbitmq

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/security"
	"github.com/acemq-go/acemq/transport"
)

// The URL's own TLS parameters (cacertfile, certfile, keyfile) are honoured
// and a development client certificate named there is refused like one
// given as an option, unless development certificates are allowed.
func TestURLTLSParametersKeepTheDevelopmentCertificateCheck(t *testing.T) {
	dir := filepath.Dir(testenv.TLSCAFile(t))
	q := url.Values{}
	q.Set("cacertfile", filepath.Join(dir, "ca.pem"))
	q.Set("certfile", filepath.Join(dir, "client.pem"))
	q.Set("keyfile", filepath.Join(dir, "client.key"))
	u := testenv.AMQPSURL(t) + "?" + q.Encode()

	_, _, err := Driver{}.Dial(context.Background(), transport.Config{URL: u})
	var dev *security.DevelopmentCertificateError
	if !errors.As(err, &dev) || dev.Role != security.RoleClientCert {
		t.Fatalf("Dial = %v, want the development client certificate refused", err)
	}
	c := dial(t, transport.Config{URL: u, Security: &security.Settings{AllowDevelopmentCertificates: true}})
	openChannel(t, c)
}
