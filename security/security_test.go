package security_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/devcerts"
	"github.com/acemq-go/acemq/security"
)

func TestFileProviderReadsPasswordOrUserPasswordTrimmedOnEveryCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	p := security.File(path, "app")
	for _, tc := range []struct{ content, user, password string }{
		{"first\n", "app", "first"},
		{"ops:second \t\r\n\n", "ops", "second"},
		{"ops:with:colon\n", "ops", "with:colon"},
		{" leading-space-kept", "app", " leading-space-kept"},
	} {
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := p.Credentials(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if c.User != tc.user || c.Password != tc.password {
			t.Fatalf("file %q read as %q / %q, want %q / %q", tc.content, c.User, c.Password, tc.user, tc.password)
		}
	}
}

func TestProviderErrorsNameTheSourceNeverTheSecret(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	passwordOnly := filepath.Join(dir, "pw")
	if err := os.WriteFile(passwordOnly, []byte("hunter2-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ACEMQ_SECURITY_TEST_EMPTY", "")
	for _, tc := range []struct {
		name string
		p    security.Provider
		want string
	}{
		{"missing file", security.File(filepath.Join(dir, "nope"), "app"), "cannot read the credentials file " + filepath.Join(dir, "nope")},
		{"empty file", security.File(empty, "app"), "the credentials file " + empty + " is empty"},
		{"no user", security.File(passwordOnly, ""), "holds a password but no user"},
		{"unset variable", security.Env("ACEMQ_SECURITY_TEST_UNSET", "app"), "the environment variable ACEMQ_SECURITY_TEST_UNSET holding the broker credentials is not set"},
		{"empty variable", security.Env("ACEMQ_SECURITY_TEST_EMPTY", "app"), "the environment variable ACEMQ_SECURITY_TEST_EMPTY is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.p.Credentials(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "acemq: ") {
				t.Fatalf("error %v, want one starting acemq: and saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}

func TestEnvProviderReadsOnEveryCall(t *testing.T) {
	p := security.Env("ACEMQ_SECURITY_TEST_PW", "app")
	t.Setenv("ACEMQ_SECURITY_TEST_PW", "one")
	c1, err := p.Credentials(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ACEMQ_SECURITY_TEST_PW", "ops:two\n")
	c2, err := p.Credentials(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c1.User != "app" || c1.Password != "one" || c2.User != "ops" || c2.Password != "two" {
		t.Fatalf("read %v/%q then %v/%q", c1.User, c1.Password, c2.User, c2.Password)
	}
}

func TestCredentialsAndCertificatesPrintNoSecret(t *testing.T) {
	c := security.Credentials{User: "app", Password: "hunter2-secret", ExpiresAt: time.Now()}
	set, err := devcerts.Generate(devcerts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cert := security.CertificatePEM(set.Client.CertPEM, set.Client.KeyPEM)
	var b strings.Builder
	for _, v := range []any{c, &c, cert, set.Client, set.CA} {
		fmt.Fprintf(&b, "%v %+v %#v %s %q\n", v, v, v, v, v)
		j, _ := json.Marshal(v)
		b.Write(j)
	}
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "c", c, "cert", cert)
	slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "c", c, "cert", cert)
	out := b.String()
	key := strings.Split(string(set.Client.KeyPEM), "\n")[1][:30]
	if strings.Contains(out, "hunter2") || strings.Contains(out, key) || strings.Contains(out, "PRIVATE KEY") {
		t.Fatalf("a secret was printed:\n%s", out)
	}
	if !strings.Contains(out, "user app (password hidden)") {
		t.Fatalf("credentials do not print their user:\n%s", out)
	}
}

func TestDevelopmentCertificateIsRecognisedBySubjectOrIssuer(t *testing.T) {
	set, err := devcerts.Generate(devcerts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	leaf := *set.Broker.Cert
	leaf.Subject.Organization = []string{"Example Corp"}
	if !security.IsDevelopmentCertificate(&leaf) {
		t.Fatal("a certificate whose issuer organisation carries the marker was not recognised")
	}
	leaf.Issuer.Organization = []string{"Example Corp"}
	if security.IsDevelopmentCertificate(&leaf) {
		t.Fatal("an unmarked certificate was taken for a development one")
	}
	if security.IsDevelopmentCertificate(nil) {
		t.Fatal("nil is not a development certificate")
	}
}

func TestCheckBrokerNamesWhereTheDevelopmentCertificateWas(t *testing.T) {
	set, err := devcerts.Generate(devcerts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clean := func(c *x509.Certificate) *x509.Certificate {
		d := *c
		d.Subject.Organization, d.Issuer.Organization = []string{"Example Corp"}, []string{"Example Corp"}
		return &d
	}
	for _, tc := range []struct {
		name   string
		peer   []*x509.Certificate
		chains [][]*x509.Certificate
		role   security.Role
	}{
		{"leaf", []*x509.Certificate{set.Broker.Cert}, nil, security.RoleBroker},
		{"intermediate", []*x509.Certificate{clean(set.Broker.Cert), set.CA.Cert}, nil, security.RoleBrokerCA},
		{"trusted CA", []*x509.Certificate{clean(set.Broker.Cert)}, [][]*x509.Certificate{{clean(set.Broker.Cert), set.CA.Cert}}, security.RoleTrustedCA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := security.CheckBroker(tc.peer, tc.chains)
			var dev *security.DevelopmentCertificateError
			if !errors.As(err, &dev) || dev.Role != tc.role {
				t.Fatalf("CheckBroker = %v, want a refusal as %q", err, tc.role)
			}
		})
	}
	if err := security.CheckBroker([]*x509.Certificate{clean(set.Broker.Cert)}, nil); err != nil {
		t.Fatalf("an unmarked chain was refused: %v", err)
	}
}

func TestSettingsCheckRefusesModeAndSchemeMismatches(t *testing.T) {
	for _, tc := range []struct {
		s       security.Settings
		scheme  string
		option  string
		mention string
	}{
		{security.Settings{Mode: security.ModeRequired}, "amqp", "Config.TLSMode", "amqps://"},
		{security.Settings{Mode: security.ModeDisabled}, "amqps", "Config.TLSMode", "amqp://"},
		{security.Settings{Mode: security.ModeInsecure}, "amqp", "Config.InsecureSkipVerifyForDevelopment", "amqps://"},
		{security.Settings{External: true}, "amqps", "Config.ExternalAuth", "ClientCertificate"},
		{security.Settings{Provider: security.Static("a", "b")}, "amqp", "", ""},
	} {
		got := tc.s.Check(tc.scheme, tc.scheme+"://host", false)
		if tc.option == "" {
			if len(got) != 0 {
				t.Fatalf("%+v with %s: unexpected %v", tc.s, tc.scheme, got)
			}
			continue
		}
		if len(got) != 1 || got[0].Option != tc.option || !strings.Contains(got[0].Reason, tc.mention) {
			t.Fatalf("%v with %s: %v, want one problem for %s mentioning %q", tc.s.Mode, tc.scheme, got, tc.option, tc.mention)
		}
	}
	if got := (security.Settings{Provider: security.Static("a", "b")}).Check("amqp", "amqp://u:***@host", true); len(got) != 1 || got[0].Option != "Config.CredentialsProvider" {
		t.Fatalf("provider with user info: %v", got)
	}
}
