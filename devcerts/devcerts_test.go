package devcerts_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acemq-go/acemq/devcerts"
	"github.com/acemq-go/acemq/security"
)

func TestWriteLeavesKeysAt0600OverAnOlderPermissiveFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "client.key"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := devcerts.Generate(devcerts.Options{Client: "orders", Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	files, err := set.Write(dir, 5671)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{files.CAKey, files.BrokerKey, files.ClientKey} {
		st, err := os.Stat(k)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("%s is %v, want 0600", k, st.Mode().Perm())
		}
	}
	pair, err := tls.LoadX509KeyPair(files.ClientCert, files.ClientKey)
	if err != nil {
		t.Fatalf("the written client pair does not load: %v", err)
	}
	if !security.IsDevelopmentCertificate(security.Chain(pair)[0]) {
		t.Fatal("the written client certificate is not marked")
	}
}

func TestIssueClientFromALoadedCAChainsToIt(t *testing.T) {
	set, err := devcerts.Generate(devcerts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := tls.X509KeyPair(set.CA.CertPEM, set.CA.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := devcerts.LoadCA(loaded)
	if err != nil {
		t.Fatal(err)
	}
	client, err := devcerts.IssueClient(ca, "svc", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Cert.CheckSignatureFrom(set.CA.Cert); err != nil {
		t.Fatalf("the issued certificate is not signed by the loaded CA: %v", err)
	}
	if _, err := devcerts.LoadCA(tls.Certificate{Certificate: [][]byte{set.Client.Cert.Raw}, PrivateKey: set.Client.Key}); err == nil {
		t.Fatal("a client certificate was accepted as a CA")
	}
}

func TestGenerateRefusesANegativeValidityAndAnEmptyHost(t *testing.T) {
	if _, err := devcerts.Generate(devcerts.Options{Validity: -time.Hour}); err == nil {
		t.Fatal("a negative validity was accepted")
	}
	if _, err := devcerts.Generate(devcerts.Options{Hosts: []string{" "}}); err == nil {
		t.Fatal("an empty host was accepted")
	}
}
