// Package devcerts makes the certificates a development or test RabbitMQ
// needs for TLS: a CA, a broker certificate and a client certificate, all
// ECDSA P-256 and all marked as development certificates (contract §8.8:
// security.DevelopmentMarker in every subject's organisation), so that no
// AceMQ client trusts them unless the application explicitly allows
// development certificates. `acemq certs` is its command-line face.
//
// The manual's page on security and TLS: https://github.com/acemq-go/acemq/blob/main/docs/security.md
package devcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/acemq-go/acemq/security"
)

// DefaultValidity is how long certificates are valid unless told otherwise.
const DefaultValidity = 30 * 24 * time.Hour

// Options say what to make. The zero value makes certificates for a broker
// on localhost and a client named "acemq-client", valid for 30 days.
type Options struct {
	// Hosts are the broker's names and addresses (subject alternative
	// names); the first is its common name. Default: localhost. The name
	// localhost also gets 127.0.0.1 and ::1.
	Hosts []string
	// Client is the client certificate's common name: the user a broker
	// with rabbitmq_auth_mechanism_ssl logs it in as. Default
	// "acemq-client".
	Client string
	// Validity is how long every certificate is valid (DefaultValidity).
	Validity time.Duration
}

// Pair is a certificate and its private key.
type Pair struct {
	Cert    *x509.Certificate
	CertPEM []byte
	Key     *ecdsa.PrivateKey
	KeyPEM  []byte
}

// String names the certificate; the key never appears.
func (p Pair) String() string {
	if p.Cert == nil {
		return "(no certificate)"
	}
	return p.Cert.Subject.String()
}

// Format prints String for every verb, so %+v never shows the key.
func (p Pair) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(p.String())) }

// Set is a CA and the broker and client certificates it signed.
type Set struct {
	CA, Broker, Client Pair
}

// Generate makes a CA, a broker certificate and a client certificate.
func Generate(opts Options) (*Set, error) {
	if len(opts.Hosts) == 0 {
		opts.Hosts = []string{"localhost"}
	}
	if opts.Client == "" {
		opts.Client = "acemq-client"
	}
	if opts.Validity == 0 {
		opts.Validity = DefaultValidity
	}
	if opts.Validity < 0 {
		return nil, fmt.Errorf("acemq: certificate validity %s is negative; give a positive duration such as 720h", opts.Validity)
	}
	for _, h := range opts.Hosts {
		if strings.TrimSpace(h) == "" {
			return nil, errors.New("acemq: a broker host name is empty; give names such as localhost or broker.example.internal")
		}
	}
	ca, err := NewCA(opts.Validity)
	if err != nil {
		return nil, err
	}
	broker, err := ca.issue(opts.Hosts[0], opts.Validity, x509.ExtKeyUsageServerAuth, opts.Hosts)
	if err != nil {
		return nil, err
	}
	client, err := IssueClient(ca, opts.Client, opts.Validity)
	if err != nil {
		return nil, err
	}
	return &Set{CA: ca, Broker: broker, Client: client}, nil
}

// NewCA makes a development CA valid for validity.
func NewCA(validity time.Duration) (Pair, error) {
	tmpl := template("AceMQ development CA", validity)
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.MaxPathLenZero = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	return sign(tmpl, nil)
}

// IssueClient makes a client certificate with common name cn signed by ca.
func IssueClient(ca Pair, cn string, validity time.Duration) (Pair, error) {
	return ca.issue(cn, validity, x509.ExtKeyUsageClientAuth, nil)
}

func (ca Pair) issue(cn string, validity time.Duration, usage x509.ExtKeyUsage, hosts []string) (Pair, error) {
	tmpl := template(cn, validity)
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			continue
		}
		tmpl.DNSNames = append(tmpl.DNSNames, h)
		if strings.EqualFold(h, "localhost") {
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.IPv4(127, 0, 0, 1), net.IPv6loopback)
		}
	}
	return sign(tmpl, &ca)
}

func template(cn string, validity time.Duration) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			Organization: []string{security.DevelopmentMarker},
			CommonName:   cn,
		},
		NotBefore: now.Add(-5 * time.Minute), // tolerate a little clock skew
		NotAfter:  now.Add(validity),
	}
}

// sign makes a key and a certificate from tmpl, signed by parent (self
// signed when nil).
func sign(tmpl *x509.Certificate, parent *Pair) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("acemq: cannot make an ECDSA P-256 key: %w", err)
	}
	issuer, signer := tmpl, key
	if parent != nil {
		issuer, signer = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		return Pair{}, fmt.Errorf("acemq: cannot sign the certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Pair{}, fmt.Errorf("acemq: cannot parse the certificate just made: %w", err)
	}
	// SEC 1 ("EC PRIVATE KEY"): what RabbitMQ's Erlang TLS and Go both read.
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("acemq: cannot encode the key: %w", err)
	}
	return Pair{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:     key,
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// Files are the paths Write wrote.
type Files struct {
	Dir                   string
	CACert, CAKey         string
	BrokerCert, BrokerKey string
	ClientCert, ClientKey string
	RabbitMQConf          string
}

// Write writes the set into dir (created 0700 when missing): ca.pem,
// ca.key, broker.pem, broker.key, client.pem, client.key and rabbitmq.conf
// (RabbitMQConf with port). Keys are written 0600, certificates 0644.
func (s *Set) Write(dir string, port int) (Files, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, fmt.Errorf("acemq: cannot create the directory %s: %w", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Files{}, fmt.Errorf("acemq: cannot resolve %s: %w", dir, err)
	}
	f := Files{
		Dir:    abs,
		CACert: filepath.Join(abs, "ca.pem"), CAKey: filepath.Join(abs, "ca.key"),
		BrokerCert: filepath.Join(abs, "broker.pem"), BrokerKey: filepath.Join(abs, "broker.key"),
		ClientCert: filepath.Join(abs, "client.pem"), ClientKey: filepath.Join(abs, "client.key"),
		RabbitMQConf: filepath.Join(abs, "rabbitmq.conf"),
	}
	writes := []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{f.CACert, s.CA.CertPEM, 0o644}, {f.CAKey, s.CA.KeyPEM, 0o600},
		{f.BrokerCert, s.Broker.CertPEM, 0o644}, {f.BrokerKey, s.Broker.KeyPEM, 0o600},
		{f.ClientCert, s.Client.CertPEM, 0o644}, {f.ClientKey, s.Client.KeyPEM, 0o600},
		{f.RabbitMQConf, []byte(RabbitMQConf(f, "127.0.0.1", port)), 0o644},
	}
	for _, w := range writes {
		if err := writeFile(w.path, w.data, w.mode); err != nil {
			return Files{}, err
		}
	}
	return f, nil
}

// writeFile writes data with exactly mode, whatever the umask or an older
// file's mode was.
func writeFile(path string, data []byte, mode os.FileMode) error {
	_ = os.Remove(path)
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("acemq: cannot write %s: %w", path, err)
	}
	if err := fh.Chmod(mode); err == nil {
		_, err = fh.Write(data)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			return nil
		}
	} else {
		_ = fh.Close()
	}
	return fmt.Errorf("acemq: cannot write %s: %w", path, err)
}

// RabbitMQConf returns rabbitmq.conf lines for a TLS listener on ip:port
// using files: TLS 1.2 and 1.3, verify_peer (a client certificate is
// verified against the CA when given), fail_if_no_peer_cert false (so
// password logins keep working beside certificate logins), and EXTERNAL
// login from the certificate's common name (enable the
// rabbitmq_auth_mechanism_ssl plugin for it).
func RabbitMQConf(files Files, ip string, port int) string {
	return fmt.Sprintf(`# TLS listener made by acemq certs. These are DEVELOPMENT certificates
# (%s): AceMQ clients refuse them unless the application
# allows development certificates. Enable the plugin for EXTERNAL logins:
#   rabbitmq-plugins enable rabbitmq_auth_mechanism_ssl
listeners.ssl.1 = %s:%d
ssl_options.cacertfile = %s
ssl_options.certfile = %s
ssl_options.keyfile = %s
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
ssl_options.versions.1 = tlsv1.3
ssl_options.versions.2 = tlsv1.2
auth_mechanisms.1 = PLAIN
auth_mechanisms.2 = AMQPLAIN
auth_mechanisms.3 = EXTERNAL
ssl_cert_login_from = common_name
`, security.DevelopmentMarker, ip, port, files.CACert, files.BrokerCert, files.BrokerKey)
}

// LoadCA makes a Pair of a loaded CA certificate and its ECDSA key (ca.pem
// and ca.key as Write wrote them), so more client certificates can be
// issued with IssueClient.
func LoadCA(pair tls.Certificate) (Pair, error) {
	if len(pair.Certificate) == 0 {
		return Pair{}, errors.New("acemq: the CA holds no certificate")
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return Pair{}, fmt.Errorf("acemq: cannot parse the CA certificate: %w", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return Pair{}, fmt.Errorf("acemq: the CA key is a %T, not the ECDSA key acemq certs writes", pair.PrivateKey)
	}
	if !cert.IsCA {
		return Pair{}, fmt.Errorf("acemq: %s is not a CA certificate", cert.Subject)
	}
	return Pair{Cert: cert, Key: key}, nil
}
