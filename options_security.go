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

// checkSecurity checks the security options against the URL, loads the
// client certificate, and records every problem as a ConfigurationError.
func checkSecurity(cfg *config, scheme, shownURL string, hasUserInfo bool) {
	s := &cfg.sec.settings
	if cfg.insecureDev && (s.Mode == security.ModeRequired || s.Mode == security.ModeDisabled) {
		cfg.problem("Config.TLSMode", "Config.TLSMode security.Mode%s contradicts Config.InsecureSkipVerifyForDevelopment; keep one of them", strings.ToUpper(s.Mode.String()[:1])+s.Mode.String()[1:])
	}
	if s.Provider != nil && cfg.credentials != nil {
		cfg.problem("Config.CredentialsProvider", "both Config.Credentials and Config.CredentialsProvider were given; use one source of credentials")
	}
	if !cfg.sec.clientCert.IsZero() {
		pair, err := cfg.sec.clientCert.Load()
		if err != nil {
			cfg.problem("Config.ClientCertificate", "%v", err)
		} else if err := security.CheckCertificates(security.Chain(pair), security.RoleClientCert, security.RoleClientCert, s.AllowDevelopmentCertificates); err != nil {
			cfg.problem("Config.ClientCertificate", "%s", strings.TrimPrefix(err.Error(), "acemq: "))
		} else {
			s.ClientCertificate = &pair
		}
	}
	// A client certificate that was given but could not be loaded is
	// already reported; Check would add that none was given.
	certFailed := !cfg.sec.clientCert.IsZero() && s.ClientCertificate == nil
	for _, p := range s.Check(scheme, shownURL, hasUserInfo) {
		if certFailed && p.Option == "Config.ExternalAuth" && scheme == "amqps" {
			continue
		}
		cfg.problem(p.Option, "%s", p.Reason)
	}
	if cfg.insecureDev && scheme == "amqps" {
		s.Mode = security.ModeInsecure
	}
}
