package rabbitmq

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/internal/redact"
	"github.com/acemq-go/acemq/security"
	"github.com/acemq-go/acemq/transport"
)

const (
	defaultConnectTimeout = 10 * time.Second
	defaultHeartbeat      = 10 * time.Second
)

// Dial opens one connection. It tries cfg.Addresses (host:port; the URL's
// host when empty) starting at cfg.Start and wrapping round once, each
// attempt bounded by cfg.ConnectTimeout (default 10s) and ctx, and returns
// the index of the address that answered. cfg.Credentials, when set, is
// asked before every attempt and replaces any user information in the URL.
//
// On failure the error names every address tried with its cause; passwords
// never appear in it. Dial is safe for concurrent use.
func (Driver) Dial(ctx context.Context, cfg transport.Config) (transport.Connection, int, error) {
	uri, err := amqp.ParseURI(cfg.URL)
	if err != nil {
		return nil, 0, fmt.Errorf("rabbitmq: cannot parse the broker URL %s: %w", redactURL(cfg.URL), err)
	}
	addrs := cfg.Addresses
	if len(addrs) == 0 {
		addrs = []string{net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port))}
	}
	start := cfg.Start
	if start < 0 || start >= len(addrs) {
		start = 0
	}
	var failures []string
	var last error
	for i := 0; i < len(addrs); i++ {
		idx := (start + i) % len(addrs)
		if err := ctx.Err(); err != nil {
			last = err
			failures = append(failures, fmt.Sprintf("%s: not tried: %v", addrs[idx], err))
			break
		}
		c, shown, err := dialOne(ctx, uri, addrs[idx], cfg)
		if err == nil {
			return c, idx, nil
		}
		last = err
		failures = append(failures, fmt.Sprintf("%s: %v", shown, err))
	}
	return nil, 0, &dialError{text: strings.Join(failures, "; "), last: last}
}

// dialError lists every address tried; it unwraps to the last cause so
// errors.Is finds context errors and errors.As a broker refusal.
type dialError struct {
	text string
	last error
}

func (e *dialError) Error() string {
	return "rabbitmq: could not connect to any broker address: " + e.text
}

func (e *dialError) Unwrap() error { return e.last }

// dialOne makes one attempt at one address. It returns the redacted URL of
// the attempt for error messages.
func dialOne(ctx context.Context, base amqp.URI, addr string, cfg transport.Config) (*connection, string, error) {
	pl, err := prepare(ctx, base, addr, cfg)
	if err != nil {
		return nil, pl.shownOr(addr), err
	}
	c := &connection{plan: pl, done: make(chan struct{}), onBlocked: cfg.OnBlocked}
	// With frames=native the publishing part is a connection AceMQ owns
	// (own.go) and channels (declarations, consuming) run on amqp091-go's:
	// each is dialled when first needed, the one the Purpose names at once.
	if pl.native && cfg.Purpose != transport.Consuming {
		_, err = c.ownPart(ctx)
	} else {
		_, err = c.amqpPart(ctx)
	}
	if err != nil {
		return nil, pl.shown, err
	}
	if pl.sec.Provider != nil && !pl.creds.ExpiresAt.IsZero() {
		c.refreshSecret(pl.sec.Provider, pl.creds.ExpiresAt)
	}
	return c, pl.shown, nil
}

// dialPlan is everything one address's dial needs, kept so a connection's
// second part dials the same address with the same settings. Only the
// login in uri changes after prepare (a refreshed secret, secret.go):
// read it with loginURI, change it with setLogin.
type dialPlan struct {
	loginMu   sync.Mutex
	uri       amqp.URI // the scheme is amqp: TLS is done by tlsConfig
	shown     string
	timeout   time.Duration
	heartbeat time.Duration
	props     amqp.Table
	external  bool
	tlsConfig *tls.Config
	sec       security.Settings
	creds     security.Credentials
	coalesce  bool
	native    bool
	onBlocked func(active bool, reason string)
}

// loginURI is a copy of the plan's URI with the login as it is now.
func (pl *dialPlan) loginURI() amqp.URI {
	pl.loginMu.Lock()
	defer pl.loginMu.Unlock()
	return pl.uri
}

// setLogin changes the login a part dialled later uses: user and password
// together, as the credentials provider answered them.
func (pl *dialPlan) setLogin(user, password string) {
	pl.loginMu.Lock()
	pl.uri.Username, pl.uri.Password = user, password
	pl.loginMu.Unlock()
}

func (pl *dialPlan) shownOr(addr string) string {
	if pl == nil || pl.shown == "" {
		return addr
	}
	return pl.shown
}

// prepare reads the settings of one attempt: address, credentials (asked
// of a provider now), TLS configuration and the URL's switches.
func prepare(ctx context.Context, base amqp.URI, addr string, cfg transport.Config) (*dialPlan, error) {
	uri := base
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("address %q is not host:port: %w", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("address %q has a bad port: %w", addr, err)
	}
	uri.Host, uri.Port = host, port
	pl := &dialPlan{timeout: cfg.ConnectTimeout, heartbeat: cfg.Heartbeat, onBlocked: cfg.OnBlocked}
	if pl.timeout <= 0 {
		pl.timeout = defaultConnectTimeout
	}
	switch {
	case pl.heartbeat == 0:
		pl.heartbeat = defaultHeartbeat
	case pl.heartbeat > 0:
		// AMQP carries the interval in whole seconds: round up, never to
		// 0 (which would mean the broker's interval).
		pl.heartbeat = (pl.heartbeat + time.Second - 1) / time.Second * time.Second
	}
	actx, cancel := context.WithTimeout(ctx, pl.timeout)
	defer cancel()
	pl.props = amqp.NewConnectionProperties()
	if cfg.ConnectionName != "" {
		pl.props.SetClientConnectionName(cfg.ConnectionName)
	}
	if cfg.Product != "" {
		pl.props["product"] = cfg.Product
	}
	if cfg.Version != "" {
		pl.props["version"] = cfg.Version
	}
	if cfg.Security != nil {
		pl.sec = *cfg.Security
	}
	pl.shown = shownURL(uri)
	if problems := pl.sec.Check(uri.Scheme, shownURL(uri), false); len(problems) > 0 {
		return pl, fmt.Errorf("the security settings cannot work with this URL: %w", problems[0])
	}
	switch {
	case pl.sec.External:
		// The broker takes the user from the client certificate.
		uri.Username, uri.Password = "", ""
		pl.external = true
	case pl.sec.Provider != nil:
		pl.creds, err = pl.sec.Provider.Credentials(actx)
		if err != nil {
			return pl, fmt.Errorf("the credentials provider failed: %w", err)
		}
		uri.Username, uri.Password = pl.creds.User, pl.creds.Password
	case cfg.Credentials != nil:
		user, password, err := cfg.Credentials(actx)
		if err != nil {
			return pl, fmt.Errorf("the credentials provider failed: %w", err)
		}
		uri.Username, uri.Password = user, password
	}
	pl.shown = shownURL(uri)
	// TLS is done here rather than by the client, so the frame guard
	// (guard.go) reads plain frames: the client is given an amqp:// URL
	// with the port kept and a socket that is already TLS. It is always a
	// configuration of ours, so the development-certificate check runs on
	// every TLS dial, verified or not.
	if uri.Scheme == "amqps" {
		base, err := tlsFor(uri, cfg.TLS)
		if err != nil {
			return pl, err
		}
		// A client certificate from the URL (certfile, keyfile) or from a
		// given tls.Config gets the check an option's gets before dialing.
		for _, pair := range base.Certificates {
			if err := security.CheckCertificates(security.Chain(pair), security.RoleClientCert, security.RoleClientCert, pl.sec.AllowDevelopmentCertificates); err != nil {
				return pl, err
			}
		}
		pl.tlsConfig = security.ClientTLS(base, pl.sec)
		uri.Scheme = "amqp"
	}
	pl.uri = uri
	if pl.coalesce, err = coalesceSetting(cfg.URL); err != nil {
		return pl, err
	}
	if pl.native, err = framesSetting(cfg.URL); err != nil {
		return pl, err
	}
	return pl, nil
}

// socket connects to the plan's address (TCP, then TLS when amqps),
// bounded by actx, with the socket's deadline set to actx's for the
// handshakes that follow. stop closes the socket if actx ends first; the
// caller calls it once the handshake is over and learns whether it fired.
func (pl *dialPlan) socket(actx context.Context, network, address string) (conn net.Conn, stop func() bool, err error) {
	var d net.Dialer
	conn, err = d.DialContext(actx, network, address)
	if err != nil {
		return nil, nil, err
	}
	if deadline, ok := actx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	raw := conn
	stop = context.AfterFunc(actx, func() { _ = raw.Close() })
	if pl.tlsConfig != nil {
		tc := tls.Client(conn, pl.tlsConfig)
		if err := tc.HandshakeContext(actx); err != nil {
			stop()
			_ = conn.Close()
			return nil, nil, err
		}
		conn = tc
	}
	return conn, stop, nil
}

// dialOwn opens the publishing connection AceMQ owns (own.go).
func (pl *dialPlan) dialOwn(ctx context.Context) (*ownConn, error) {
	actx, cancel := context.WithTimeout(ctx, pl.timeout)
	defer cancel()
	uri := pl.loginURI()
	sock, stop, err := pl.socket(actx, "tcp", net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)))
	if err != nil {
		return nil, explainLogin(dialCause(actx, err), pl.sec)
	}
	props := make(map[string]any, len(pl.props))
	for k, v := range pl.props {
		props[k] = v
	}
	oc, err := openOwn(sock, ownParams{
		login:      ownLogin{external: pl.external, user: uri.Username, password: uri.Password},
		vhost:      uri.Vhost,
		properties: props,
		heartbeat:  pl.heartbeat,
		onBlocked:  pl.onBlocked,
	})
	interrupted := !stop()
	if err != nil {
		return nil, explainLogin(dialCause(actx, err), pl.sec)
	}
	if interrupted {
		_ = oc.closeWithin(0)
		return nil, actx.Err()
	}
	return oc, nil
}

// dialAMQP opens an amqp091-go connection over a socket of ours: the frame
// guard reads under it (guard.go) and a heldConn writes under it
// (hold.go), returned for holding (when coalescing) and for bounding
// publish calls by their contexts.
func (pl *dialPlan) dialAMQP(ctx context.Context) (*amqp.Connection, *heldConn, error) {
	actx, cancel := context.WithTimeout(ctx, pl.timeout)
	defer cancel()
	// A negative heartbeat is off. amqp091-go takes the broker's interval
	// when asked for less than 1s (0 is its default, 10s), so it is asked
	// for less than 1s and the frame guard shows it a broker that
	// proposes none: it answers tune with 0, off, as AMQP lets a client
	// choose (guard.go).
	config := amqp.Config{Heartbeat: pl.heartbeat, Properties: amqp.Table{}, Locale: "en_US"}
	for k, v := range pl.props {
		config.Properties[k] = v
	}
	uri := pl.loginURI()
	switch {
	case pl.external:
		config.SASL = []amqp.Authentication{&amqp.ExternalAuth{}}
	case uri.Username != "" || uri.Password != "":
		config.SASL = []amqp.Authentication{&amqp.PlainAuth{Username: uri.Username, Password: uri.Password}}
	}
	// The client's Dial hook takes no context, so the attempt's context is
	// captured here: it bounds the TCP connect, sets the socket deadline
	// for the TLS and AMQP handshakes, and closes the socket if it ends
	// while the handshake is still running.
	var stop func() bool
	var guard *guardedConn
	var held *heldConn
	config.Dial = func(network, address string) (net.Conn, error) {
		conn, st, err := pl.socket(actx, network, address)
		if err != nil {
			return nil, err
		}
		stop = st
		guard = newGuardedConn(conn)
		guard.noHeartbeat = pl.heartbeat < 0
		// Writes gather only while a publishing goroutine holds the
		// connection (with coalesce=on and frames=amqp091), and that
		// goroutine writes them (hold.go): nothing kept is ever written
		// late by a goroutine of ours. Held or not, the writer bounds
		// each write by its publish call's context (watch.go).
		held = newHeldConn(guard)
		return held, nil
	}
	ac, err := amqp.DialConfig(uri.String(), config)
	interrupted := stop != nil && !stop()
	if err != nil {
		return nil, nil, explainLogin(dialCause(actx, err), pl.sec)
	}
	if interrupted {
		_ = ac.Close()
		return nil, nil, actx.Err()
	}
	if guard != nil {
		guard.maxFrame.Store(uint32(ac.Config.FrameSize))
	}
	return ac, held, nil
}

// coalesceSetting reads the URL's coalesce query parameter: on (the
// default) or off, which makes every write go straight to the socket (for
// measuring what gathering writes saves).
func coalesceSetting(rawURL string) (bool, error) {
	return urlSwitch(rawURL, "coalesce", "on", "off")
}

// framesSetting reads the URL's frames query parameter: native (the
// default), where publishers run on a connection AceMQ owns (own.go), or
// amqp091, where amqp091-go publishes and confirms as
// before (for comparison, and as a way back).
func framesSetting(rawURL string) (bool, error) {
	return urlSwitch(rawURL, "frames", "native", "amqp091")
}

// urlSwitch reads a two-valued query parameter of the broker URL: true
// when it is absent or on, false when it is off, and an error naming both
// values for anything else.
func urlSwitch(rawURL, name, on, off string) (bool, error) {
	u, err := neturl.Parse(rawURL)
	if err != nil {
		return true, nil // ParseURI has accepted it; nothing to read
	}
	switch v := u.Query().Get(name); v {
	case "", on:
		return true, nil
	case off:
		return false, nil
	default:
		return false, fmt.Errorf("the URL's %s parameter is %q; write %s=%s (the default) or %s=%s", name, v, name, on, name, off)
	}
}

// tlsFor makes the TLS configuration amqp091-go would have made for uri:
// the caller's configuration when given, else the URL's certificate files
// (cacertfile, certfile, keyfile) and server_name_indication, with the
// system store when no CA file is named; the server name defaults to the
// host connected to.
func tlsFor(uri amqp.URI, given *tls.Config) (*tls.Config, error) {
	var c *tls.Config
	if given != nil {
		c = given.Clone()
	} else {
		c = &tls.Config{ServerName: uri.ServerName, MinVersion: tls.VersionTLS12}
		if uri.CACertFile != "" {
			data, err := os.ReadFile(uri.CACertFile)
			if err != nil {
				return nil, fmt.Errorf("cannot read the CA certificate file named in the URL: %w", err)
			}
			c.RootCAs = x509.NewCertPool()
			c.RootCAs.AppendCertsFromPEM(data)
		}
		if uri.CertFile != "" && uri.KeyFile != "" {
			cert, err := tls.LoadX509KeyPair(uri.CertFile, uri.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("cannot load the client certificate named in the URL: %w", err)
			}
			c.Certificates = []tls.Certificate{cert}
		}
	}
	if c.ServerName == "" {
		c.ServerName = uri.Host
	}
	return c, nil
}

// dialCause explains a failed attempt: a context or deadline error when the
// attempt ran out of time (the socket deadline may fire a moment before the
// context does), the broker's refusal as a *transport.Error, and a client
// side failure (an I/O error the client reports as code 501) as plain text.
func dialCause(actx context.Context, err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) && ae != amqp.ErrClosed && !ae.Server {
		err = errors.New(ae.Reason)
	} else {
		err = convertError(err)
	}
	err = explainTLS(err)
	if ctxErr := actx.Err(); ctxErr != nil {
		return fmt.Errorf("%w (%v)", ctxErr, err)
	}
	if deadline, ok := actx.Deadline(); ok && !time.Now().Before(deadline) {
		return fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	return err
}

// explainLogin adds what to do when a certificate login failed: the broker
// refused the EXTERNAL login, or closed the connection right after the TLS
// handshake (TLS 1.3 reports a refused client certificate only then, as a
// reset or closed socket).
func explainLogin(err error, sec security.Settings) error {
	if sec.ClientCertificate == nil || err == nil {
		return err
	}
	subject := "(unparsed)"
	if leaf := sec.ClientCertificate.Leaf; leaf != nil {
		subject = leaf.Subject.String()
	}
	text := err.Error()
	var te *transport.Error
	switch {
	case sec.External && errors.As(err, &te) && te.Code == transport.CodeAccessRefused:
		// The owned connection asks for authentication_failure_close, so
		// the broker says why in its own words.
		return fmt.Errorf("the broker refused the EXTERNAL login with the client certificate %s; it answered %q. Create a user named after the certificate's common name on the broker (rabbitmqctl add_user, then clear_password and set_permissions), or check ssl_cert_login_from: %w", subject, te.Reason, err)
	case sec.External && errors.Is(err, amqp.ErrCredentials), sec.External && strings.Contains(text, "username or password not allowed"):
		return fmt.Errorf("the broker refused the EXTERNAL login with the client certificate %s; it answered %q. Create a user named after the certificate's common name on the broker (rabbitmqctl add_user, then clear_password and set_permissions), or check ssl_cert_login_from: %w", subject, "username or password not allowed", err)
	case strings.Contains(text, "connection reset by peer"), strings.Contains(text, "use of closed network connection"), strings.Contains(text, "broken pipe"):
		return fmt.Errorf("the broker closed the connection right after the TLS handshake, which is how it refuses a client certificate it does not accept under TLS 1.3 (%s): have it issued by a CA in the broker's ssl_options.cacertfile, or check it has not expired: %w", subject, err)
	}
	return err
}

// explainTLS adds what to do to a failed verification of the broker's
// certificate; the x509 error stays reachable with errors.As.
func explainTLS(err error) error {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var dev *security.DevelopmentCertificateError
	if errors.As(err, &dev) {
		return err
	}
	if text := err.Error(); strings.Contains(text, "remote error: tls:") {
		return fmt.Errorf("the broker refused the TLS handshake; it answered %q. When a client certificate was given, the broker does not accept it: have it issued by a CA in the broker's ssl_options.cacertfile, or check it has not expired: %w", strings.TrimSpace(text[strings.Index(text, "remote error: tls:")+len("remote error: "):]), err)
	}
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("the broker's TLS certificate is not trusted: %w; give the CA that signed it with acemq.Config{TLS: &tls.Config{RootCAs: pool}} (the pool replaces the system store) or add it to the system store", err)
	case errors.As(err, &host):
		return fmt.Errorf("the broker's TLS certificate does not match the host connected to: %w; connect with a host name the certificate lists, or reissue the certificate for this name", err)
	case errors.As(err, &invalid):
		return fmt.Errorf("the broker's TLS certificate is not valid: %w; renew or reissue the broker's certificate", err)
	}
	return err
}

// shownURL renders a URL for messages with the password masked.
func shownURL(u amqp.URI) string {
	var b strings.Builder
	b.WriteString(u.Scheme)
	b.WriteString("://")
	if u.Username != "" {
		b.WriteString(u.Username)
		b.WriteString(":***@")
	}
	b.WriteString(net.JoinHostPort(u.Host, strconv.Itoa(u.Port)))
	if u.Vhost != "/" && u.Vhost != "" {
		b.WriteString("/")
		b.WriteString(u.Vhost)
	}
	// A password holding "/" is read by ParseURI as part of the vhost:
	// the one rule hides it there too.
	return redact.URL(b.String())
}

// redactURL masks the password of a URL that may not parse (one rule
// for the module: internal/redact).
func redactURL(raw string) string { return redact.URL(raw) }
