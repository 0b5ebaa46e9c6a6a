package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq/devcerts"
)

func newCerts() *cobra.Command {
	var (
		dir      string
		hosts    []string
		client   string
		validity time.Duration
		port     int
	)
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make development TLS certificates (CA, broker, client) and a rabbitmq.conf snippet",
		Long: `Make a development CA, a broker certificate and a client certificate (ECDSA P-256),
every one marked "ACEMQ DEVELOPMENT ONLY - DO NOT TRUST" in its organisation, so AceMQ
clients refuse them unless the application allows development certificates
(acemq.Config.DevelopmentCertificates). Keys are written 0600. rabbitmq.conf in the same
directory holds a TLS listener (verify_peer, client certificate optional) and EXTERNAL
login from the certificate's common name.

Without --dir the files go to acemq/certs under the user's configuration
directory ($XDG_CONFIG_HOME or ~/.config on Linux), never into the current
directory: a private key written into a working tree is one "git add ." away
from a repository.`,
		Example: `  acemq certs
  acemq certs --dir /srv/broker/tls --host broker.test --host 10.0.0.5 --client orders --validity 168h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("dir") {
				d, err := defaultCertsDir()
				if err != nil {
					return err
				}
				dir = d
			}
			if dir == "" {
				return fmt.Errorf("--dir is empty; name the directory to write the certificates into")
			}
			if validity <= 0 {
				return fmt.Errorf("--validity %s is not positive; give a duration such as 720h", validity)
			}
			if port < 1 || port > 65535 {
				return fmt.Errorf("--port %d is not a TCP port; give 1 to 65535 (5671 is amqps' own)", port)
			}
			set, err := devcerts.Generate(devcerts.Options{Hosts: hosts, Client: client, Validity: validity})
			if err != nil {
				return err
			}
			files, err := set.Write(dir, port)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "wrote development certificates (valid until %s) to %s:\n", set.Broker.Cert.NotAfter.UTC().Format(time.RFC3339), files.Dir)
			for _, l := range [][2]string{
				{files.CACert, "CA certificate: trust it with acemq.Config{TLS: &tls.Config{RootCAs: pool}}"},
				{files.CAKey, "CA key (0600)"},
				{files.BrokerCert, "broker certificate for " + fmt.Sprint(set.Broker.Cert.DNSNames, set.Broker.Cert.IPAddresses)},
				{files.BrokerKey, "broker key (0600)"},
				{files.ClientCert, "client certificate, common name " + set.Client.Cert.Subject.CommonName},
				{files.ClientKey, "client key (0600)"},
				{files.RabbitMQConf, "the TLS listener below"},
			} {
				fmt.Fprintf(out, "  %s  %s\n", l[0], l[1])
			}
			fmt.Fprintf(out, "\n%s", devcerts.RabbitMQConf(files, "127.0.0.1", port))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write the files into (created 0700; default acemq/certs in the user's configuration directory)")
	cmd.Flags().StringSliceVar(&hosts, "host", []string{"localhost"}, "broker host name or IP address (repeat for more); localhost also gets 127.0.0.1 and ::1")
	cmd.Flags().StringVar(&client, "client", "acemq-client", "common name of the client certificate (the user EXTERNAL logs in as)")
	cmd.Flags().DurationVar(&validity, "validity", devcerts.DefaultValidity, "how long the certificates are valid")
	cmd.Flags().IntVar(&port, "port", 5671, "TLS listener port for the rabbitmq.conf snippet")
	return cmd
}

// defaultCertsDir is where `acemq certs` writes without --dir: acemq/certs
// in the user's configuration directory, outside any working tree.
func defaultCertsDir() (string, error) {
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("found no configuration directory for the certificates (%v); pass --dir", err)
	}
	return filepath.Join(base, "acemq", "certs"), nil
}
