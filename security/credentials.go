package security

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
)

// Credentials are what one dial logs in with. They print their user only:
// String, every fmt verb, slog and JSON show "user app (password hidden)",
// so a Credentials value can never leak its password into output.
type Credentials struct {
	User     string
	Password string
	// ExpiresAt, when not zero, is when Password stops being accepted
	// (a short-lived token). The RabbitMQ transport asks the provider
	// again before then and hands the new secret to the open connection
	// (AMQP update-secret); when that fails it closes the connection so
	// that recovery dials with a fresh answer.
	ExpiresAt time.Time
}

// String shows the user, never the password.
func (c Credentials) String() string {
	if c.User == "" {
		return "credentials (password hidden)"
	}
	return "user " + c.User + " (password hidden)"
}

// Format makes every fmt verb (%v, %+v, %#v, %s, %q) print String.
func (c Credentials) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprintf(f, "%q", c.String())
		return
	}
	_, _ = f.Write([]byte(c.String()))
}

// GoString is String, so %#v hides the password too.
func (c Credentials) GoString() string { return c.String() }

// LogValue shows the user only in slog output.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(slog.String("user", c.User), slog.String("password", "***"))
}

// MarshalJSON writes the user only.
func (c Credentials) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}{c.User, "***"})
}

// Provider returns the credentials for one dial. A Conn asks it on every
// dial (each address, each recovery attempt), so a rotated secret needs no
// restart; its error fails that dial and recovery tries again later.
// Implementations must be safe for concurrent use and must not put the
// secret into their errors.
type Provider interface {
	Credentials(ctx context.Context) (Credentials, error)
}

// ProviderFunc adapts a function to a Provider.
type ProviderFunc func(ctx context.Context) (Credentials, error)

// Credentials calls f.
func (f ProviderFunc) Credentials(ctx context.Context) (Credentials, error) { return f(ctx) }

// Static returns a Provider that always answers user and password.
func Static(user, password string) Provider {
	return ProviderFunc(func(context.Context) (Credentials, error) {
		return Credentials{User: user, Password: password}, nil
	})
}

// Env returns a Provider that reads the environment variable name on every
// dial. It holds "password" or "user:password" (split at the first colon,
// so a password containing a colon must be written as user:password);
// trailing whitespace is trimmed. user is the user name when the variable
// holds a password only. A variable that is unset or empty fails the dial
// with an error naming the variable, never its value.
func Env(name, user string) Provider {
	return ProviderFunc(func(context.Context) (Credentials, error) {
		v, ok := os.LookupEnv(name)
		if !ok {
			return Credentials{}, fmt.Errorf("acemq: the environment variable %s holding the broker credentials is not set; set it to the password or to user:password", name)
		}
		return parseSecret(v, user, "the environment variable "+name)
	})
}

// File returns a Provider that reads the file at path on every dial, so a
// secret rotated by rewriting the file (a mounted Kubernetes or Vault
// secret) is used by the next dial without a restart. The file holds
// "password" or "user:password" (split at the first colon); trailing
// whitespace is trimmed. user is the user name when the file holds a
// password only. An unreadable or empty file fails the dial with an error
// naming the path, never its content.
func File(path, user string) Provider {
	return ProviderFunc(func(context.Context) (Credentials, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is said once, below
			}
			return Credentials{}, fmt.Errorf("acemq: cannot read the credentials file %s: %w; make it readable by this process and put the password or user:password in it", path, err)
		}
		return parseSecret(string(b), user, "the credentials file "+path)
	})
}

func parseSecret(text, user, source string) (Credentials, error) {
	text = strings.TrimRight(text, " \t\r\n")
	if text == "" {
		return Credentials{}, fmt.Errorf("acemq: %s is empty; put the password or user:password in it", source)
	}
	if u, p, ok := strings.Cut(text, ":"); ok {
		if u == "" {
			return Credentials{}, fmt.Errorf("acemq: %s holds user:password with an empty user; write the user before the colon", source)
		}
		return Credentials{User: u, Password: p}, nil
	}
	if user == "" {
		return Credentials{}, fmt.Errorf("acemq: %s holds a password but no user was given; write user:password in it or name the user", source)
	}
	return Credentials{User: user, Password: text}, nil
}
