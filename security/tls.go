package security

import (
	"crypto/tls"
	"crypto/x509"
)

// Settings are a Conn's security choices, handed to the transport on every
// dial. The zero value is the safe default: the mode follows the URL,
// development certificates are refused, no client certificate, PLAIN
// login with the URL's (or the provider's) user and password.
type Settings struct {
	// Mode is the TLS mode; ModeAuto follows the URL.
	Mode Mode
	// AllowDevelopmentCertificates lets development certificates (see
	// DevelopmentMarker) through: for development only.
	AllowDevelopmentCertificates bool
	// ClientCertificate, when set, is presented for mutual TLS.
	ClientCertificate *tls.Certificate
	// External logs in with the SASL EXTERNAL mechanism: the broker takes
	// the user from the client certificate, no password is sent.
	External bool
	// Provider, when set, is asked for credentials on every dial.
	Provider Provider
}

// ClientTLS returns a copy of base (a new config when nil) fitted to s: at
// least TLS 1.2, verification off only in ModeInsecure, the client
// certificate presented, and a VerifyConnection hook that refuses a
// development certificate anywhere in what the broker presents or in the
// chain it was verified to (so also as the trusted CA), whether or not
// verification is on, unless s allows them. A VerifyConnection already in
// base runs first.
func ClientTLS(base *tls.Config, s Settings) *tls.Config {
	t := &tls.Config{}
	if base != nil {
		t = base.Clone()
	}
	if t.MinVersion < tls.VersionTLS12 {
		t.MinVersion = tls.VersionTLS12
	}
	if s.Mode == ModeInsecure {
		t.InsecureSkipVerify = true
	}
	if s.ClientCertificate != nil {
		t.Certificates = []tls.Certificate{*s.ClientCertificate}
	}
	if s.AllowDevelopmentCertificates {
		return t
	}
	prior := t.VerifyConnection
	t.VerifyConnection = func(cs tls.ConnectionState) error {
		if prior != nil {
			if err := prior(cs); err != nil {
				return err
			}
		}
		return CheckBroker(cs.PeerCertificates, cs.VerifiedChains)
	}
	return t
}

// CheckBroker refuses a development certificate among the certificates the
// broker presented (leaf first) or in the chains they were verified to,
// whose last element is the trusted CA.
func CheckBroker(peer []*x509.Certificate, chains [][]*x509.Certificate) error {
	if err := CheckCertificates(peer, RoleBroker, RoleBrokerCA, false); err != nil {
		return err
	}
	for _, chain := range chains {
		if len(chain) == 0 {
			continue
		}
		root := chain[len(chain)-1]
		if err := CheckCertificates([]*x509.Certificate{root}, RoleTrustedCA, RoleTrustedCA, false); err != nil {
			return err
		}
		if err := CheckCertificates(chain[:len(chain)-1], RoleBroker, RoleBrokerCA, false); err != nil {
			return err
		}
	}
	return nil
}
