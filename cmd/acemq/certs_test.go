package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
	"github.com/acemq-go/acemq/security"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s holds no PEM block", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCertsWritesMarkedP256CertificatesKeysAt0600AndASnippet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	args := []string{"certs", "--dir", dir, "--host", "broker.test", "--host", "10.0.0.5", "--client", "orders", "--validity", "48h", "--port", "5999"}
	r := run0(t, "", args...)
	for _, f := range []string{"ca.key", "broker.key", "client.key"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("%s is %v, want 0600", f, st.Mode().Perm())
		}
	}
	ca, broker, client := readCert(t, filepath.Join(dir, "ca.pem")), readCert(t, filepath.Join(dir, "broker.pem")), readCert(t, filepath.Join(dir, "client.pem"))
	for _, c := range []*x509.Certificate{ca, broker, client} {
		if !security.IsDevelopmentCertificate(c) || c.Subject.Organization[0] != security.DevelopmentMarker {
			t.Fatalf("%s does not carry the development marker in its subject", c.Subject)
		}
		if k, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
			t.Fatalf("%s key is %T, want ECDSA P-256", c.Subject, c.PublicKey)
		}
		if life := time.Until(c.NotAfter); life < 47*time.Hour || life > 49*time.Hour {
			t.Fatalf("%s is valid for another %s, want about 48h", c.Subject, life)
		}
	}
	if !ca.IsCA || broker.IsCA || client.IsCA {
		t.Fatal("only the CA may be a CA")
	}
	if err := broker.CheckSignatureFrom(ca); err != nil {
		t.Fatalf("the broker certificate is not signed by the CA: %v", err)
	}
	if len(broker.DNSNames) != 1 || broker.DNSNames[0] != "broker.test" || len(broker.IPAddresses) != 1 || !broker.IPAddresses[0].Equal(net.ParseIP("10.0.0.5")) {
		t.Fatalf("broker SANs %v %v, want broker.test and 10.0.0.5", broker.DNSNames, broker.IPAddresses)
	}
	if client.Subject.CommonName != "orders" || client.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Fatalf("client certificate %s (%v), want CN orders for client auth", client.Subject, client.ExtKeyUsage)
	}
	conf, err := os.ReadFile(filepath.Join(dir, "rabbitmq.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"listeners.ssl.1 = 127.0.0.1:5999", "ssl_options.verify = verify_peer", "ssl_options.fail_if_no_peer_cert = false", "ssl_options.cacertfile = " + filepath.Join(dir, "ca.pem"), "auth_mechanisms.3 = EXTERNAL"} {
		if !strings.Contains(string(conf), want) || !strings.Contains(r.stdout, want) {
			t.Fatalf("the snippet (file and output) lacks %q:\n%s", want, conf)
		}
	}
	// localhost also gets both loopback addresses.
	dir2 := filepath.Join(t.TempDir(), "local")
	run0(t, "", "certs", "--dir", dir2)
	local := readCert(t, filepath.Join(dir2, "broker.pem"))
	if len(local.IPAddresses) != 2 || !local.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || !local.IPAddresses[1].Equal(net.IPv6loopback) {
		t.Fatalf("localhost certificate IPs %v, want 127.0.0.1 and ::1", local.IPAddresses)
	}
	if life := time.Until(local.NotAfter); life < 29*24*time.Hour || life > 31*24*time.Hour {
		t.Fatalf("default validity %s, want 30 days", life)
	}
}

func TestCertsRefusesAValidityThatIsNotPositive(t *testing.T) {
	args := []string{"certs", "--dir", t.TempDir(), "--validity", "-1h"}
	mustFailWithSentence(t, acemqCmd(t, "", args...), "--validity -1h0m0s is not positive", args...)
}

// TestCertsOutputServesTheTestNodesTLSListener: scripts/rabbitmq.sh makes
// the test node's certificates with `acemq certs` and starts its TLS
// listener from the rabbitmq.conf snippet it wrote. A client trusting that
// CA and presenting that client certificate connects when development
// certificates are allowed and is refused otherwise.
func TestCertsOutputServesTheTestNodesTLSListener(t *testing.T) {
	dir := filepath.Dir(testenv.TLSCAFile(t))
	u := testenv.AMQPSURL(t)
	conf, err := os.ReadFile(filepath.Join(dir, "rabbitmq.conf"))
	if err != nil || !strings.Contains(string(conf), "made by acemq certs") {
		t.Fatalf("the test node's TLS directory %s holds no acemq certs snippet (%v)", dir, err)
	}
	pemCA, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	opts := acemq.Config{Logger: slog.New(slog.DiscardHandler), TLS: &tls.Config{RootCAs: pool}, ClientCertificate: security.CertificateFiles(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key"))}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err = acemq.Connect(ctx, u, opts)
	var ce *acemq.ConfigurationError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), security.DevelopmentMarker) {
		t.Fatalf("without the allowance Connect returned %v, want the development client certificate refused", err)
	}
	opts.DevelopmentCertificates = true
	c, err := acemq.Connect(ctx, u, opts)
	if err != nil {
		t.Fatalf("with the allowance: %v", err)
	}
	defer c.Close(context.Background())
	if r := c.Health(ctx); !r.Open {
		t.Fatalf("health: %+v", r)
	}
}

func TestCLIOutputNeverShowsThePassword(t *testing.T) {
	const secret = "s3cret-never-printed-4471"
	plain := testenv.AMQPURL(t)
	host := strings.TrimSuffix(plain[strings.LastIndex(plain, "@")+1:], "/")
	mgmtHost := strings.TrimSuffix(testManagementURL(t)[strings.LastIndex(testManagementURL(t), "@")+1:], "/")
	down := strings.Replace(brokerDown(t), "guest:guest", "app:"+secret, 1)
	for _, args := range [][]string{
		{"health", "--url", down},
		{"health", "--url", "amqp://app:" + secret + "@" + host + "/"}, // refused login
		{"dlq", "list", "--url", "amqp://app:" + secret + "@" + host + "/", "--management-url", "http://app:" + secret + "@" + mgmtHost + "/"},
		{"publish", "--url", "amqp://app:" + secret + "@[::1/", "--key", "q", "--body", "x"},
	} {
		r := acemqCmd(t, "{}", args...)
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Fatalf("acemq %s printed the password:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.stdout, r.stderr)
		}
		if r.code == 0 {
			t.Fatalf("acemq %s succeeded; the test wants a failure that names the URL", strings.Join(args, " "))
		}
		if args[0] == "health" && !strings.Contains(r.stderr, "app:***@") {
			t.Fatalf("acemq %s does not show the URL as app:***@host:\n%s", strings.Join(args, " "), r.stderr)
		}
	}
}
