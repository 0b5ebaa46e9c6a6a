package security

import "fmt"

// Mode is how a connection uses TLS (behaviour §1.1).
type Mode int

const (
	// ModeAuto (the zero value) takes the mode from the URL: amqps:// is
	// ModeRequired, amqp:// is ModeDisabled.
	ModeAuto Mode = iota
	// ModeRequired is TLS 1.2 or later with the broker's chain and host
	// name verified. The default for amqps://.
	ModeRequired
	// ModeInsecure is TLS without verifying the broker: for development
	// against a self-signed broker only. It is set only by the named
	// development option acemq.Config.InsecureSkipVerifyForDevelopment.
	ModeInsecure
	// ModeDisabled is plaintext (amqp://): no TLS at all.
	ModeDisabled
)

// String names the mode as the documentation does.
func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeRequired:
		return "required"
	case ModeInsecure:
		return "insecure"
	case ModeDisabled:
		return "disabled"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}
