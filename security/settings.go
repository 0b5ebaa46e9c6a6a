package security

import "fmt"

// Problem is a setting that can never work with the URL given: the option
// to fix and a sentence saying what to use instead. The acemq package turns
// each into a *acemq.ConfigurationError before anything dials.
type Problem struct {
	Option string
	Reason string
}

// Error is "option {Option}: {Reason}".
func (p Problem) Error() string { return fmt.Sprintf("option %s: %s", p.Option, p.Reason) }

// Check returns every setting in s that cannot work with a URL of scheme
// ("amqp", "amqps", "memory", ...) shown as shownURL (password masked).
// hasUserInfo says whether the URL carries user information.
func (s Settings) Check(scheme, shownURL string, hasUserInfo bool) []Problem {
	var out []Problem
	add := func(option, format string, args ...any) {
		out = append(out, Problem{Option: option, Reason: fmt.Sprintf(format, args...)})
	}
	tls := scheme == "amqps"
	switch s.Mode {
	case ModeRequired:
		if !tls {
			add("Config.TLSMode", "TLS is required (security.ModeRequired) but the URL %s does not use TLS; connect to amqps:// on the broker's TLS port (5671 by default)", shownURL)
		}
	case ModeDisabled:
		if tls {
			add("Config.TLSMode", "plaintext was chosen (security.ModeDisabled) but the URL %s uses TLS; use an amqp:// URL to the broker's plaintext port (5672 by default), or drop Config.TLSMode (security.ModeDisabled) to keep TLS", shownURL)
		}
	case ModeInsecure:
		if !tls {
			add("Config.InsecureSkipVerifyForDevelopment", "it was given with the URL %s, which does not use TLS and has no certificate to verify; use amqps:// or drop the field", shownURL)
		}
	}
	if s.ClientCertificate != nil && !tls {
		add("Config.ClientCertificate", "a client certificate was given but the URL %s does not use TLS, so it could never be presented; use amqps://", shownURL)
	}
	if s.External {
		if !tls {
			add("Config.ExternalAuth", "EXTERNAL login takes the user from the client certificate, which needs TLS, but the URL %s does not use it; use amqps:// with acemq.Config.ClientCertificate", shownURL)
		} else if s.ClientCertificate == nil {
			add("Config.ExternalAuth", "EXTERNAL login takes the user from the client certificate, and none was given; add acemq.Config{ClientCertificate: security.CertificateFiles(cert, key)}")
		}
		if hasUserInfo {
			add("Config.ExternalAuth", "the URL %s carries user information, but EXTERNAL login takes the user from the client certificate and sends no password; drop the user information from the URL", shownURL)
		}
		if s.Provider != nil {
			add("Config.ExternalAuth", "a credentials provider was given, but EXTERNAL login sends no password; drop Config.CredentialsProvider or Config.ExternalAuth")
		}
	}
	if s.Provider != nil && hasUserInfo {
		add("Config.CredentialsProvider", "the URL %s carries user information and a credentials provider was given; use one source of credentials (drop the user information from the URL)", shownURL)
	}
	return out
}
