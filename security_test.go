package acemq_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/devcerts"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/security"
)

// The test node's TLS listener uses the files `acemq certs` wrote
// (scripts/rabbitmq.sh): ca.pem, ca.key, client.pem and client.key sit
// beside ACEMQ_TEST_TLS_CA. Its listener verifies a client certificate when
// one is given (verify_peer) and lets password logins through without one.

func tlsDir(t *testing.T) string { return filepath.Dir(testenv.TLSCAFile(t)) }

// testCA loads the test node's development CA (certificate and key).
func testCA(t *testing.T) devcerts.Pair {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(tlsDir(t), "ca.pem"), filepath.Join(tlsDir(t), "ca.key"))
	if err != nil {
		t.Fatalf("loading the test CA: %v", err)
	}
	ca, err := devcerts.LoadCA(pair)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// sendConfirmed publishes one item to q and fails unless it is confirmed.
func sendConfirmed(t *testing.T, c *acemq.Conn, q string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	sent, err := acemq.NewPublisher[item](c, "", q, acemq.PublisherConfig{}).Send(ctx, item{n})
	if err != nil {
		t.Fatalf("publish %d: %v", n, err)
	}
	if sent.Outcome != acemq.OutcomeConfirmed {
		t.Fatalf("publish %d: outcome %q, want confirmed", n, sent.Outcome)
	}
}

func withoutUser(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = nil
	return u.String()
}

func TestTLSModeAndSchemeMatrix(t *testing.T) {
	plain, secure := testenv.AMQPURL(t), testenv.AMQPSURL(t)
	trust := acemq.Config{TLS: &tls.Config{RootCAs: testCAPool(t)}}
	dev := acemq.Config{DevelopmentCertificates: true}
	for _, tc := range []struct {
		name    string
		scheme  string
		opts    []acemq.Config
		option  string // ConfigurationError expected naming this option
		mention string // ... and saying this
	}{
		{"auto amqp", "amqp", nil, "", ""},
		{"auto amqps", "amqps", []acemq.Config{trust, dev}, "", ""},
		{"required amqp", "amqp", []acemq.Config{{TLSMode: security.ModeRequired}}, "Config.TLSMode", "connect to amqps://"},
		{"required amqps", "amqps", []acemq.Config{{TLSMode: security.ModeRequired}, trust, dev}, "", ""},
		{"insecure amqp", "amqp", []acemq.Config{{InsecureSkipVerifyForDevelopment: true}}, "Config.InsecureSkipVerifyForDevelopment", "use amqps://"},
		{"insecure amqps", "amqps", []acemq.Config{{InsecureSkipVerifyForDevelopment: true}, dev}, "", ""},
		{"insecure through Config.TLSMode", "amqps", []acemq.Config{{TLSMode: security.ModeInsecure}}, "Config.TLSMode", "Config.InsecureSkipVerifyForDevelopment"},
		{"disabled amqp", "amqp", []acemq.Config{{TLSMode: security.ModeDisabled}}, "", ""},
		{"disabled amqps", "amqps", []acemq.Config{{TLSMode: security.ModeDisabled}}, "Config.TLSMode", "use an amqp:// URL"},
		{"required and insecure", "amqps", []acemq.Config{{TLSMode: security.ModeRequired, InsecureSkipVerifyForDevelopment: true}}, "Config.TLSMode", "keep one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.option != "" {
				addr, check := noDialAddr(t)
				_, err := connectTLS(t, tc.scheme+"://guest:guest@"+addr+"/", tc.opts...)
				check()
				wantConfigError(t, err, tc.option, tc.mention)
				if strings.Contains(err.Error(), "guest:guest") {
					t.Fatalf("the error shows the URL's password: %v", err)
				}
				return
			}
			u := plain
			if tc.scheme == "amqps" {
				u = secure
			}
			c, err := connectTLS(t, u, tc.opts...)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			sendConfirmed(t, c, classicQueue(t, c, "tls.mode"), 1)
		})
	}
}

func TestDevelopmentBrokerCertificateIsRefusedVerifiedOrNotUnlessAllowed(t *testing.T) {
	u := testenv.AMQPSURL(t)
	trust := acemq.Config{TLS: &tls.Config{RootCAs: testCAPool(t)}}
	for _, tc := range []struct {
		name string
		opts []acemq.Config
	}{
		{"verified", []acemq.Config{trust}},
		{"unverified", []acemq.Config{{InsecureSkipVerifyForDevelopment: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := connectTLS(t, u, tc.opts...)
			var dev *security.DevelopmentCertificateError
			if !errors.As(err, &dev) {
				t.Fatalf("Connect to a broker with a development certificate returned %v, want a *security.DevelopmentCertificateError", err)
			}
			if dev.Role != security.RoleBroker {
				t.Fatalf("refused as %q, want %q", dev.Role, security.RoleBroker)
			}
			for _, want := range []string{security.DevelopmentMarker, "acemq.Config.DevelopmentCertificates", "issued by your organisation's CA"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not say %q", err, want)
				}
			}
			c, err := connectTLS(t, u, append(tc.opts, acemq.Config{DevelopmentCertificates: true})...)
			if err != nil {
				t.Fatalf("with Config.DevelopmentCertificates: %v", err)
			}
			if r := c.Health(context.Background()); !r.Open {
				t.Fatalf("health with the allowance: %+v", r)
			}
		})
	}
}

func TestDevelopmentClientCertificateIsRefusedBeforeDialUnlessAllowed(t *testing.T) {
	dir := tlsDir(t)
	cert := acemq.Config{ClientCertificate: security.CertificateFiles(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key"))}
	addr, check := noDialAddr(t)
	_, err := connectTLS(t, "amqps://guest:guest@"+addr+"/", cert, acemq.Config{InsecureSkipVerifyForDevelopment: true})
	check()
	wantConfigError(t, err, "Config.ClientCertificate", security.DevelopmentMarker)
	if !strings.Contains(err.Error(), string(security.RoleClientCert)) || !strings.Contains(err.Error(), "Config.DevelopmentCertificates") {
		t.Fatalf("error %q does not say the client certificate was refused and how to allow it", err)
	}
	// Allowed: the broker verifies it against its CA and the password
	// login goes through beside it.
	c, err := connectTLS(t, testenv.AMQPSURL(t), cert, acemq.Config{TLS: &tls.Config{RootCAs: testCAPool(t)}, DevelopmentCertificates: true})
	if err != nil {
		t.Fatalf("a marked client certificate with the allowance: %v", err)
	}
	sendConfirmed(t, c, classicQueue(t, c, "tls.clientcert"), 1)
}

func TestClientCertificateErrorsNameTheFilesNeverTheKey(t *testing.T) {
	dir := t.TempDir()
	set, err := devcerts.Generate(devcerts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A key that does not match the certificate.
	other, _ := devcerts.Generate(devcerts.Options{})
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := os.WriteFile(certFile, set.Client.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, other.Client.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cert security.Certificate
		want string
	}{
		{"missing file", security.CertificateFiles(filepath.Join(dir, "none.pem"), keyFile), filepath.Join(dir, "none.pem")},
		{"mismatched key file", security.CertificateFiles(certFile, keyFile), certFile},
		{"mismatched PEM values", security.CertificatePEM(set.Client.CertPEM, other.Client.KeyPEM), "PEM values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, check := noDialAddr(t)
			_, err := connectTLS(t, "amqps://guest:guest@"+addr+"/", acemq.Config{ClientCertificate: tc.cert, DevelopmentCertificates: true})
			check()
			wantConfigError(t, err, "Config.ClientCertificate", tc.want)
			if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), string(other.Client.KeyPEM[30:60])) {
				t.Fatalf("the error shows key material: %v", err)
			}
		})
	}
}

// externalUser issues a client certificate signed by the test node's CA
// for a fresh common name, and creates the broker user of that name with
// no password and full permissions on /.
func externalUser(t *testing.T, prefix string) (security.Certificate, string) {
	t.Helper()
	cn := testenv.Unique(prefix)
	pair, err := devcerts.IssueClient(testCA(t), cn, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	testenv.BrokerUser(t, cn, "")
	return security.CertificatePEM(pair.CertPEM, pair.KeyPEM), cn
}

// externalLogins counts the broker's connections of user that logged in
// with EXTERNAL, as rabbitmqctl lists them (the management API's connection
// details come from statistics, which RabbitMQ 4 leaves out when the
// deprecated feature management_metrics_collection is denied).
func externalLogins(t *testing.T, user string) (external int, all string) {
	t.Helper()
	all = testenv.RabbitCtl(t, "list_connections", "-q", "--no-table-headers", "user", "auth_mechanism")
	for _, line := range strings.Split(all, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == user && f[1] == "EXTERNAL" {
			external++
		}
	}
	return external, all
}

func TestMutualTLSWithExternalLoginPublishes(t *testing.T) {
	cert, cn := externalUser(t, "acemq-external")
	u := withoutUser(t, testenv.AMQPSURL(t))
	c, err := connectTLS(t, u, acemq.Config{TLS: &tls.Config{RootCAs: testCAPool(t)}, ClientCertificate: cert, ExternalAuth: true, DevelopmentCertificates: true, ClientName: "external-" + cn})
	if err != nil {
		t.Fatalf("EXTERNAL login with a client certificate: %v", err)
	}
	sendConfirmed(t, c, classicQueue(t, c, "tls.external"), 7)
	// Publishing and consuming: two connections, both EXTERNAL.
	if ext, all := externalLogins(t, cn); ext != 2 {
		t.Fatalf("the broker lists %d EXTERNAL connections of %s, want 2:\n%s", ext, cn, all)
	}
}

func TestExternalLoginRefusedSaysWhatTheBrokerAnswered(t *testing.T) {
	u := withoutUser(t, testenv.AMQPSURL(t))
	trust := acemq.Config{TLS: &tls.Config{RootCAs: testCAPool(t)}}
	t.Run("no user for the certificate", func(t *testing.T) {
		pair, err := devcerts.IssueClient(testCA(t), testenv.Unique("acemq-nobody"), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		_, err = connectTLS(t, u, trust, acemq.Config{DevelopmentCertificates: true, ExternalAuth: true, ClientCertificate: security.CertificatePEM(pair.CertPEM, pair.KeyPEM)})
		if err == nil {
			t.Fatal("EXTERNAL login with a certificate whose user does not exist succeeded")
		}
		// The broker's own answer (the publishing connection asks for
		// authentication_failure_close), not a client's guess.
		for _, want := range []string{"refused the EXTERNAL login", `answered "ACCESS_REFUSED - Login was refused using authentication mechanism EXTERNAL`, "add_user"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %q", err, want)
			}
		}
	})
	t.Run("certificate from a CA the broker does not trust", func(t *testing.T) {
		other, err := devcerts.Generate(devcerts.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// TLS 1.2: the broker's verdict on the client certificate comes
		// inside the handshake (TLS 1.3 may send it after, as a reset).
		_, err = connectTLS(t, u, acemq.Config{TLS: &tls.Config{RootCAs: testCAPool(t), MaxVersion: tls.VersionTLS12}, DevelopmentCertificates: true, ExternalAuth: true, ClientCertificate: security.CertificatePEM(other.Client.CertPEM, other.Client.KeyPEM)})
		if err == nil {
			t.Fatal("a client certificate from an unknown CA was accepted")
		}
		for _, want := range []string{"the broker refused the TLS handshake", `answered "tls: unknown certificate authority"`, "ssl_options.cacertfile"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %q", err, want)
			}
		}
	})
}

func TestExternalLoginSettingsThatCannotWorkAreConfigurationErrors(t *testing.T) {
	addr, check := noDialAddr(t)
	defer check()
	for _, tc := range []struct {
		name, url, mention string
		opts               []acemq.Config
	}{
		{"no certificate", "amqps://" + addr + "/", "none was given", nil},
		{"plaintext", "amqp://" + addr + "/", "needs TLS", nil},
		{"password in URL", "amqps://app:secret@" + addr + "/", "drop the user information", []acemq.Config{{ClientCertificate: security.CertificatePEM(devPair(t))}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := connectTLS(t, tc.url, append(tc.opts, acemq.Config{ExternalAuth: true, DevelopmentCertificates: true})...)
			wantConfigError(t, err, "Config.ExternalAuth", tc.mention)
		})
	}
}

func devPair(t *testing.T) ([]byte, []byte) {
	t.Helper()
	set, err := devcerts.Generate(devcerts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return set.Client.CertPEM, set.Client.KeyPEM
}

func TestCredentialsProviderWithURLUserInfoIsAConfigurationError(t *testing.T) {
	addr, check := noDialAddr(t)
	_, err := connectTLS(t, "amqp://app:hunter2@"+addr+"/", acemq.Config{CredentialsProvider: security.Static("app", "x")})
	check()
	wantConfigError(t, err, "Config.CredentialsProvider", "one source of credentials")
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("the error shows the URL's password: %v", err)
	}
}
