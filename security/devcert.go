package security

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"strings"
)

// DevelopmentMarker is the text the AceMQ family's development tools put in
// the organisation of every certificate they make (contract §8.8). A
// certificate whose subject or issuer organisation contains it is a
// development certificate.
const DevelopmentMarker = "ACEMQ DEVELOPMENT ONLY - DO NOT TRUST"

// IsDevelopmentCertificate reports whether cert's subject or issuer
// organisation carries DevelopmentMarker. A nil certificate is not one.
func IsDevelopmentCertificate(cert *x509.Certificate) bool {
	if cert == nil {
		return false
	}
	return marked(cert.Subject) || marked(cert.Issuer)
}

func marked(n pkix.Name) bool {
	for _, o := range n.Organization {
		if strings.Contains(o, DevelopmentMarker) {
			return true
		}
	}
	return false
}

// Role says where a development certificate was found.
type Role string

// Where a development certificate can be met.
const (
	RoleBroker     Role = "the broker's certificate"
	RoleBrokerCA   Role = "a certificate in the broker's chain"
	RoleTrustedCA  Role = "the trusted CA"
	RoleClientCert Role = "the client certificate"
)

// DevelopmentCertificateError refuses a development certificate met while
// development certificates are not allowed. errors.As reaches it through
// the errors Connect returns.
type DevelopmentCertificateError struct {
	// Role says where the certificate was met.
	Role Role
	// Subject is the certificate's subject, for the operator.
	Subject string
}

// Error says which certificate was refused, why, and the two ways forward.
func (e *DevelopmentCertificateError) Error() string {
	return fmt.Sprintf("acemq: %s (%s) is a development certificate: its organisation says %q, so it is refused. Use a certificate issued by your organisation's CA, or, for development only, allow development certificates with acemq.Config.DevelopmentCertificates",
		e.Role, e.Subject, DevelopmentMarker)
}

// CheckCertificates returns a *DevelopmentCertificateError for the first
// development certificate in certs unless allow is set. The first
// certificate is reported as first, the others as rest.
func CheckCertificates(certs []*x509.Certificate, first, rest Role, allow bool) error {
	if allow {
		return nil
	}
	for i, c := range certs {
		if !IsDevelopmentCertificate(c) {
			continue
		}
		role := rest
		if i == 0 {
			role = first
		}
		return &DevelopmentCertificateError{Role: role, Subject: c.Subject.String()}
	}
	return nil
}
