package acemq_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/internal/testenv"
)

// These tests run against the test node's TLS listener (scripts/rabbitmq.sh
// start gives every node one, with development certificates made by
// `acemq certs`: DNS:localhost, IP:127.0.0.1 and ::1) and check spec §1.1:
// amqps:// speaks TLS 1.2 or later and always verifies the broker unless
// the named development option is given. The node's certificates are
// development certificates, so every test that connects to it allows them
// explicitly (acemq.Config.DevelopmentCertificates); security_test.go shows
// they are refused otherwise.

// testCAPool returns a pool holding only the test node's CA.
func testCAPool(t *testing.T) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(testenv.TLSCAFile(t))
	if err != nil {
		t.Fatalf("reading the test CA: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("the test CA file %s holds no PEM certificate", testenv.TLSCAFile(t))
	}
	return pool
}

// withHost returns rawURL with its host (not port) replaced.
func withHost(t *testing.T, rawURL, host string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = net.JoinHostPort(host, u.Port())
	return u.String()
}

func connectTLS(t *testing.T, rawURL string, opts ...acemq.Config) (*acemq.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	all := brokertest.Overlay(acemq.Config{Logger: slog.New(slog.DiscardHandler)}, opts...)
	c, err := acemq.Connect(ctx, rawURL, all)
	if err == nil {
		t.Cleanup(func() { _ = c.Close(context.Background()) })
	}
	return c, err
}

// noDialAddr returns a loopback host:port that records any connection made
// to it, and a check that fails the test if one was.
func noDialAddr(t *testing.T) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var dialed atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialed.Store(true)
			_ = c.Close()
		}
	}()
	return ln.Addr().String(), func() {
		t.Helper()
		_ = ln.Close()
		<-done
		if dialed.Load() {
			t.Fatal("Connect dialed the broker although the options were invalid; options must be validated before any dial")
		}
	}
}

func wantConfigError(t *testing.T, err error, option, mention string) {
	t.Helper()
	var ce *acemq.ConfigurationError
	if !errors.As(err, &ce) {
		t.Fatalf("Connect returned %v, want a *ConfigurationError", err)
	}
	if ce.Option != option {
		t.Fatalf("ConfigurationError names option %q, want %q (%v)", ce.Option, option, err)
	}
	if !strings.Contains(err.Error(), mention) {
		t.Fatalf("ConfigurationError %q does not mention %q", err, mention)
	}
}

func TestAMQPSWithTestCAPublishesConfirmedAndConsumes(t *testing.T) {
	base := testenv.AMQPSURL(t)
	pool := testCAPool(t)
	for _, host := range []string{"localhost", "127.0.0.1"} { // both are in the certificate
		t.Run(host, func(t *testing.T) {
			c, err := connectTLS(t, withHost(t, base, host), acemq.Config{TLS: &tls.Config{RootCAs: pool}, DevelopmentCertificates: true})
			if err != nil {
				t.Fatalf("amqps:// with the test CA failed: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			q := classicQueue(t, c, "tls.roundtrip")
			sent, err := acemq.NewPublisher[item](c, "", q, acemq.PublisherConfig{}).Send(ctx, item{42})
			if err != nil {
				t.Fatalf("a publish over amqps:// failed: %v", err)
			}
			if sent.Outcome != acemq.OutcomeConfirmed {
				t.Fatalf("outcome %q, want confirmed", sent.Outcome)
			}
			got := make(chan *acemq.Message[item], 1)
			k, err := acemq.Consume(ctx, c, q, func(ctx context.Context, m *acemq.Message[item]) acemq.Decision {
				select {
				case got <- m:
				default:
				}
				return acemq.Accept()
			}, acemq.ConsumerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = k.Close(context.Background()) }()
			select {
			case m := <-got:
				if m.Payload.N != 42 || m.Envelope.ID != sent.Envelope.ID {
					t.Fatalf("consumed %+v (id %s), want n=42 id %s", m.Payload, m.Envelope.ID, sent.Envelope.ID)
				}
			case <-ctx.Done():
				t.Fatal("no message consumed over amqps:// within 15s")
			}
		})
	}
}

func TestAMQPSWithoutCAFailsAsUntrustedAndSaysWhatToDo(t *testing.T) {
	// No Config.TLS: the system store, which does not hold the throwaway CA.
	_, err := connectTLS(t, testenv.AMQPSURL(t), acemq.Config{DevelopmentCertificates: true})
	if err == nil {
		t.Fatal("amqps:// to a broker whose CA is not trusted connected; the chain was not verified")
	}
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("error %v does not carry x509.UnknownAuthorityError", err)
	}
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) {
		t.Fatalf("error %v does not carry *tls.CertificateVerificationError", err)
	}
	for _, want := range []string{"acemq: ", "not trusted", "RootCAs"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "guest:guest") {
		t.Fatalf("error %q shows the password", err)
	}
}

func TestAMQPSHostNameNotInCertificateFailsVerification(t *testing.T) {
	// The certificate names localhost and 127.0.0.1 only; verifying it for
	// another name must fail even though the chain is trusted.
	_, err := connectTLS(t, testenv.AMQPSURL(t), acemq.Config{TLS: &tls.Config{
		RootCAs:    testCAPool(t),
		ServerName: "broker.invalid",
	}, DevelopmentCertificates: true})
	if err == nil {
		t.Fatal("amqps:// connected although the certificate does not name broker.invalid")
	}
	var host x509.HostnameError
	if !errors.As(err, &host) {
		t.Fatalf("error %v does not carry x509.HostnameError", err)
	}
	if !strings.Contains(err.Error(), "does not match the host") {
		t.Fatalf("error %q does not say the host name does not match", err)
	}
}

func TestTLSSettingsWithPlainAMQPAreConfigurationErrorsBeforeDial(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opt    acemq.Config
		option string
	}{
		{"Config.TLS", acemq.Config{TLS: &tls.Config{}}, "Config.TLS"},
		{"insecure option", acemq.Config{InsecureSkipVerifyForDevelopment: true}, "Config.InsecureSkipVerifyForDevelopment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, check := noDialAddr(t)
			_, err := connectTLS(t, "amqp://guest:guest@"+addr+"/", tc.opt)
			check()
			wantConfigError(t, err, tc.option, "amqp://")
		})
	}
}

func TestAMQPSRefusesATLSConfigCappedBelow12BeforeDial(t *testing.T) {
	addr, check := noDialAddr(t)
	_, err := connectTLS(t, "amqps://guest:guest@"+addr+"/", acemq.Config{TLS: &tls.Config{MaxVersion: tls.VersionTLS11}})
	check()
	wantConfigError(t, err, "Config.TLS", "TLS 1.2")
}

func TestAMQPSRaisesMinVersionTo12(t *testing.T) {
	// A server that speaks at most TLS 1.1: a client config asking for
	// MinVersion 1.0 would agree on 1.1 if honoured; Connect must raise it
	// to 1.2 so the handshake fails instead.
	cert := selfSignedCert(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS10,
		MaxVersion:   tls.VersionTLS11,
	})
	if err != nil {
		t.Fatal(err)
	}
	serverErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		serverErr <- c.(*tls.Conn).Handshake()
	}()
	defer ln.Close()

	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	_, err = connectTLS(t, "amqps://guest:guest@"+ln.Addr().String()+"/", acemq.Config{ConnectionTimeout: 5 * time.Second, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS10}})
	if err == nil {
		t.Fatal("Connect succeeded against a TLS 1.1 server")
	}
	select {
	case serr := <-serverErr:
		if serr == nil {
			t.Fatalf("the client completed a TLS handshake with a TLS 1.1-only server (Connect: %v); MinVersion was not raised to 1.2", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the test server saw no handshake")
	}
	if !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("Connect error %q does not name the protocol version mismatch", err)
	}
}

// selfSignedCert makes a certificate for 127.0.0.1, valid for an hour.
func selfSignedCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "acemq tls test"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func TestAMQPSRefusesInsecureSkipVerifyWithoutTheDevelopmentOption(t *testing.T) {
	addr, check := noDialAddr(t)
	_, err := connectTLS(t, "amqps://guest:guest@"+addr+"/", acemq.Config{TLS: &tls.Config{InsecureSkipVerify: true}})
	check()
	wantConfigError(t, err, "Config.TLS", "Config.InsecureSkipVerifyForDevelopment")
}

func TestAMQPSDevelopmentOptionConnectsWithoutVerifying(t *testing.T) {
	u := testenv.AMQPSURL(t)
	for _, tc := range []struct {
		name string
		opts acemq.Config
	}{
		{"option alone", acemq.Config{InsecureSkipVerifyForDevelopment: true, DevelopmentCertificates: true}},
		{"with an InsecureSkipVerify config", acemq.Config{TLS: &tls.Config{InsecureSkipVerify: true}, InsecureSkipVerifyForDevelopment: true, DevelopmentCertificates: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No CA: only the development option lets this through.
			c, err := connectTLS(t, u, tc.opts)
			if err != nil {
				t.Fatalf("amqps:// with Config.InsecureSkipVerifyForDevelopment failed: %v", err)
			}
			if r := c.Health(context.Background()); !r.Open {
				t.Fatalf("health over an unverified amqps:// connection: %+v", r)
			}
		})
	}
}
