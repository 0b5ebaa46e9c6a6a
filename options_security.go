package acemq

import (
	"strings"

	"github.com/acemq-go/acemq/security"
)

// securityConfig is what the security options collect; Connect checks it
// against the URL before anything dials (checkSecurity).
type securityConfig struct {
	settings   security.Settings
	clientCert security.Certificate
}

// WithTLSMode states the TLS mode instead of leaving it to the URL:
// security.ModeRequired (TLS, the broker verified: what amqps:// does by
// default) or security.ModeDisabled (plaintext amqp://). A mode that does
// not match the URL's scheme is a ConfigurationError before any dial, so a
// service configured to require TLS can never be pointed at a plaintext
// URL by mistake. The insecure mode is set only by
// WithInsecureSkipVerifyForDevelopment.
func WithTLSMode(m security.Mode) Option {
	return func(c *config) {
		switch m {
		case security.ModeAuto, security.ModeRequired, security.ModeDisabled:
		case security.ModeInsecure:
			c.problem("WithTLSMode", "the insecure mode is set only with acemq.WithInsecureSkipVerifyForDevelopment(), so that it reads as the development setting it is; use that option with an amqps:// URL")
			return
		default:
			c.problem("WithTLSMode", "%v is not a TLS mode; use security.ModeRequired or security.ModeDisabled", m)
			return
		}
		c.sec.settings.Mode = m
	}
}

// WithDevelopmentCertificates allows development certificates (those whose
// subject or issuer organisation says security.DevelopmentMarker, made by
// `acemq certs`): as the broker's certificate, in its chain, as the trusted
// CA and as the client certificate. Without it every one of them is
// refused, with verification on or off. For development and tests only.
func WithDevelopmentCertificates() Option {
	return func(c *config) { c.sec.settings.AllowDevelopmentCertificates = true }
}

// WithClientCertificate presents a client certificate for mutual TLS
// (amqps:// only): security.CertificateFiles(cert, key) or
// security.CertificatePEM(cert, key). Connect loads it before dialing; an
// unreadable or mismatched pair, or a development certificate without
// WithDevelopmentCertificates, is a ConfigurationError naming the files
// (never the key).
func WithClientCertificate(cert security.Certificate) Option {
	return func(c *config) { c.sec.clientCert = cert }
}

// WithExternalAuth logs in with the SASL EXTERNAL mechanism: the broker
// (with its rabbitmq_auth_mechanism_ssl plugin) takes the user from the
// client certificate and no password is sent. It needs amqps:// and
// WithClientCertificate, and refuses user information in the URL and a
// credentials provider.
func WithExternalAuth() Option {
	return func(c *config) { c.sec.settings.External = true }
}

// WithCredentialsProvider sets where credentials come from, asked on every
// dial (each address, each recovery attempt) so a rotated secret needs no
// restart: security.Static, security.Env, security.File or a
// security.ProviderFunc. A provider whose answer carries an expiry has its
// secret refreshed on the open connection before then (AMQP update-secret).
// It cannot be combined with user information in the URL or with
// WithCredentials.
func WithCredentialsProvider(p security.Provider) Option {
	return func(c *config) {
		if p == nil {
			c.problem("WithCredentialsProvider", "the provider is nil; give security.Static, security.Env, security.File or a security.ProviderFunc")
		}
		c.sec.settings.Provider = p
	}
}

// checkSecurity checks the security options against the URL, loads the
// client certificate, and records every problem as a ConfigurationError.
func checkSecurity(cfg *config, scheme, shownURL string, hasUserInfo bool) {
	s := &cfg.sec.settings
	if cfg.insecureDev && (s.Mode == security.ModeRequired || s.Mode == security.ModeDisabled) {
		cfg.problem("WithTLSMode", "WithTLSMode(security.Mode%s) contradicts WithInsecureSkipVerifyForDevelopment(); keep one of them", strings.ToUpper(s.Mode.String()[:1])+s.Mode.String()[1:])
	}
	if s.Provider != nil && cfg.credentials != nil {
		cfg.problem("WithCredentialsProvider", "both WithCredentials and WithCredentialsProvider were given; use one source of credentials")
	}
	if !cfg.sec.clientCert.IsZero() {
		pair, err := cfg.sec.clientCert.Load()
		if err != nil {
			cfg.problem("WithClientCertificate", "%v", err)
		} else if err := security.CheckCertificates(security.Chain(pair), security.RoleClientCert, security.RoleClientCert, s.AllowDevelopmentCertificates); err != nil {
			cfg.problem("WithClientCertificate", "%s", strings.TrimPrefix(err.Error(), "acemq: "))
		} else {
			s.ClientCertificate = &pair
		}
	}
	// A client certificate that was given but could not be loaded is
	// already reported; Check would add that none was given.
	certFailed := !cfg.sec.clientCert.IsZero() && s.ClientCertificate == nil
	for _, p := range s.Check(scheme, shownURL, hasUserInfo) {
		if certFailed && p.Option == "WithExternalAuth" && scheme == "amqps" {
			continue
		}
		cfg.problem(p.Option, "%s", p.Reason)
	}
	if cfg.insecureDev && scheme == "amqps" {
		s.Mode = security.ModeInsecure
	}
}
