package security

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Certificate is a client certificate and its private key for mutual TLS,
// from files or from PEM values. It prints where it comes from, never the
// key.
type Certificate struct {
	certFile, keyFile string
	certPEM, keyPEM   []byte
}

// CertificateFiles names a PEM certificate file and its PEM key file.
func CertificateFiles(certFile, keyFile string) Certificate {
	return Certificate{certFile: certFile, keyFile: keyFile}
}

// CertificatePEM holds a PEM certificate (chain) and its PEM key.
func CertificatePEM(certPEM, keyPEM []byte) Certificate {
	return Certificate{certPEM: certPEM, keyPEM: keyPEM}
}

// IsZero reports whether c names no certificate.
func (c Certificate) IsZero() bool {
	return c.certFile == "" && c.keyFile == "" && c.certPEM == nil && c.keyPEM == nil
}

// String says where the certificate comes from.
func (c Certificate) String() string {
	if c.certFile != "" || c.keyFile != "" {
		return fmt.Sprintf("client certificate %s (key %s)", c.certFile, c.keyFile)
	}
	return "client certificate from PEM values (key hidden)"
}

// Format makes every fmt verb print String, so %+v never shows the key.
func (c Certificate) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprintf(f, "%q", c.String())
		return
	}
	_, _ = f.Write([]byte(c.String()))
}

// GoString is String.
func (c Certificate) GoString() string { return c.String() }

// Load reads and parses the certificate and key. Its errors name the files
// (or say "PEM values") and never contain key material.
func (c Certificate) Load() (tls.Certificate, error) {
	certPEM, keyPEM := c.certPEM, c.keyPEM
	if c.certFile != "" || c.keyFile != "" {
		var err error
		if certPEM, err = os.ReadFile(c.certFile); err != nil {
			return tls.Certificate{}, fmt.Errorf("cannot read the client certificate file %s: %v", c.certFile, pathless(err))
		}
		if keyPEM, err = os.ReadFile(c.keyFile); err != nil {
			return tls.Certificate{}, fmt.Errorf("cannot read the client key file %s: %v", c.keyFile, pathless(err))
		}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// X509KeyPair's errors describe the PEM structure, not its bytes.
		return tls.Certificate{}, fmt.Errorf("%s does not hold a PEM certificate and a matching PEM private key: %v", c, err)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return tls.Certificate{}, fmt.Errorf("%s: cannot parse the certificate: %v", c, err)
		}
	}
	return pair, nil
}

// Chain returns the parsed certificates of a loaded pair, leaf first.
func Chain(pair tls.Certificate) []*x509.Certificate {
	var out []*x509.Certificate
	for _, der := range pair.Certificate {
		if c, err := x509.ParseCertificate(der); err == nil {
			out = append(out, c)
		}
	}
	return out
}

func pathless(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
