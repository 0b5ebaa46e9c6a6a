package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/actuator"
	"github.com/acemq-go/acemq/console"
)

// consoleFlags are the settings acemq console and acemq demo --console share.
type consoleFlags struct {
	listen, token, traceURL, mgmt, auditPath string
	readOnly                                 bool
	identityHeader                           string
	trustedProxies                           []string
}

func (f *consoleFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to serve the console on (loopback by default; port 0 picks one)")
	cmd.Flags().StringVar(&f.token, "token", os.Getenv("ACEMQ_CONSOLE_TOKEN"), "the token that signs a browser or script in (default $ACEMQ_CONSOLE_TOKEN, else one is generated and printed; a given token is never printed, and one that looks guessable, such as passwordpassword, is refused)")
	cmd.Flags().BoolVar(&f.readOnly, "read-only", false, "show messages but hide and refuse every action")
	cmd.Flags().StringVar(&f.traceURL, "trace-url", os.Getenv("ACEMQ_TRACE_URL"), "link trace ids to a tracing UI; {traceId} is replaced (e.g. http://localhost:16686/trace/{traceId})")
	cmd.Flags().StringVar(&f.auditPath, "audit-log", "", "append the audit log to this file as JSON lines (default: stderr)")
	cmd.Flags().StringVar(&f.identityHeader, "identity-header", "", "behind an authenticating proxy: the request header naming the signed-in person (e.g. X-Forwarded-User), recorded in the audit log; believed only from --trusted-proxy addresses")
	cmd.Flags().StringSliceVar(&f.trustedProxies, "trusted-proxy", nil, "address or CIDR of a proxy whose --identity-header and X-Forwarded-For are believed (repeat or comma-separate)")
}

func newConsole() *cobra.Command {
	var u string
	var f consoleFlags
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the dead-letter console: see, replay, park, purge and download dead letters in a browser",
		Long: "Serve the dead-letter console on --listen (loopback by default). It lists every .dlq and .parked queue live, " +
			"groups a queue's messages by reason, shows one message in full, and replays, parks, purges or downloads them " +
			"with the same rules as `acemq dlq replay`. When it generates the token it prints it and a one-time sign-in link " +
			"(a code that works once, within an hour; the token itself never goes in a URL); a token given with --token or " +
			"$ACEMQ_CONSOLE_TOKEN is never printed: sign in with it on the page. Browsing a queue takes its messages and returns " +
			"them (the redelivered flag is set; order is kept), and only where that moves none toward a delivery limit: elsewhere " +
			"the page says why and reads only when asked. A memory:// broker lives inside one process: " +
			"use `acemq demo --console` to see it.",
		Example: `  acemq console --url amqp://guest:guest@localhost:5672/
  ACEMQ_CONSOLE_TOKEN=... acemq console --url amqp://... --listen 127.0.0.1:9090 --read-only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needURL(u); err != nil {
				return err
			}
			ctx := cmd.Context()
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			c, err := connect(cctx, u, "acemq-console")
			cancel()
			if err != nil {
				return err
			}
			defer closeConn(c)
			return serveConsole(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), c, u, f)
		},
	}
	urlFlag(cmd, &u)
	f.register(cmd)
	cmd.Flags().StringVar(&f.mgmt, "management-url", os.Getenv("ACEMQ_MANAGEMENT_URL"), "RabbitMQ management API, to list queues (default $ACEMQ_MANAGEMENT_URL, else --url's host and credentials on port 15672)")
	return cmd
}

// serveConsole serves the console for c until ctx ends.
func serveConsole(ctx context.Context, out, errOut io.Writer, c *acemq.Conn, brokerURL string, f consoleFlags) error {
	token, generated := f.token, false
	if token == "" {
		var err error
		if token, err = console.GenerateToken(); err != nil {
			return err
		}
		generated = true
	}
	var audit io.Writer = errOut
	if f.auditPath != "" {
		file, err := os.OpenFile(f.auditPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("cannot open the audit log %s (%v); check the path or leave --audit-log out", f.auditPath, err)
		}
		defer file.Close()
		audit = file
	}
	h, err := console.New(c, console.Config{URL: brokerURL, ManagementURL: f.mgmt, Token: token, ReadOnly: f.readOnly, TraceURL: f.traceURL, Audit: audit,
		IdentityHeader: f.identityHeader, TrustedProxies: f.trustedProxies})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("the console cannot listen on %s (%v); pick another --listen address", f.listen, err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	if !addr.IP.IsLoopback() {
		fmt.Fprintf(errOut, "warning: the console listens on %s, beyond this machine; anyone who has the token can replay and purge (use --read-only, or a loopback address behind a proxy with TLS)\n", addr)
	}
	host := addr.String()
	if addr.IP.IsUnspecified() {
		host = fmt.Sprintf("127.0.0.1:%d", addr.Port)
	}
	mode := ""
	if f.readOnly {
		mode = " (read-only)"
	}
	// A token the operator gave (--token, $ACEMQ_CONSOLE_TOKEN) is never
	// printed: stdout often ends up in journald or a pod's log. Only a
	// generated one is, since nobody else knows it.
	if generated {
		// The link carries a one-time code in its fragment, not the token:
		// a browser keeps every URL it opens in its history.
		link, err := h.SignInLink()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "console%s: http://%s%s\n", mode, host, link)
		fmt.Fprintf(out, "token: %s\n", token)
		fmt.Fprintln(out, "(the link signs one browser in, once, within an hour; sign other browsers in with the token, and scripts send it as Authorization: Bearer; it never goes in a URL. Ctrl-C stops the console)")
	} else {
		fmt.Fprintf(out, "console%s: http://%s/ (sign in with the token you gave; it is not printed)\n", mode, host)
		fmt.Fprintln(out, "(Ctrl-C stops the console)")
	}
	err = actuator.Serve(ctx, ln, h)
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("the console stopped: %s", strings.TrimSuffix(sentence(err), "."))
	}
	return nil
}
