// Package security holds what AceMQ for Go needs to connect safely: the TLS
// modes (required, insecure for development, disabled), the refusal of
// development certificates (contract §8.8), client certificates for mutual
// TLS, and credentials providers (static, environment, file, function)
// whose secrets never appear in output.
//
// The package depends on the standard library only; the acemq package's
// options (acemq.Config.TLSMode, acemq.Config.DevelopmentCertificates,
// acemq.Config.ClientCertificate, acemq.Config.ExternalAuth,
// acemq.Config.CredentialsProvider) put its values into a Conn, and the
// RabbitMQ transport applies them on every dial.
//
// The manual's page on security and TLS: https://github.com/acemq-go/acemq/blob/main/docs/security.md
package security
