package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// ownConn is the publishing connection AceMQ owns from handshake to close
// (frames=native, the default): it speaks AMQP 0-9-1 itself, the way pgconn
// speaks PostgreSQL's protocol, instead of writing frames into another
// library's stream. It opens the connection (protocol header, start and
// start-ok with SASL PLAIN or EXTERNAL, tune and tune-ok, open), keeps it
// alive (heartbeats both ways), opens publishing channels (channel.open,
// confirm.select), writes publishes (frames.go) through the coalescing
// writer (hold.go), reads the broker's basic.ack, basic.nack and
// basic.return, reports connection.blocked and unblocked, and closes
// channels and the connection in either direction, surfacing the broker's
// reply code and text as a *transport.Error.
//
// One reader goroutine reads every frame and answers the publishers'
// waiters itself; it never waits for a writer and runs no user code. One
// control goroutine answers what needs a write (the broker's
// channel.close and channel.flow), one notices goroutine calls onBlocked
// (user code: a slow log handler must not stall the acks), and one
// heartbeat goroutine writes heartbeats and drops a connection the broker
// has gone silent on. All belong to the ownConn: they end when it ends,
// and close waits for them (for the notices goroutine, within its bound).
type ownConn struct {
	sock      net.Conn
	w         *heldConn
	fr        *frameReader
	frameMax  int           // negotiated frame_max, whole frame
	chanMax   uint16        // negotiated channel_max
	heartbeat time.Duration // negotiated; 0 when off
	onBlocked func(active bool, reason string)

	mu      sync.Mutex
	chans   map[uint16]*ownPublisher
	lastID  uint16
	closing bool  // connection.close sent by us
	err     error // why the connection ended, when not closed by us
	ended   bool

	secretOk chan struct{} // update-secret-ok, reader → updateSecret
	reads    atomic.Uint64 // frames read, watched by the heartbeat goroutine
	ctl      chan func()   // replies that must write, reader → control goroutine
	notices  blockNotices  // connection.blocked and unblocked, reader → notices goroutine
	done     chan struct{} // closed once the reader has ended
	wg       sync.WaitGroup
	noticed  chan struct{} // closed once the notices goroutine has ended
}

// ctlQueue bounds the replies queued for the control goroutine: a broker
// that sends more channel closes and flow changes than that without the
// connection being able to answer them has the connection dropped.
const ctlQueue = 256

// blockNotices carries connection.blocked and unblocked from the reader
// to the goroutine that calls onBlocked: the reader appends and never
// waits; when the callback falls behind by more than maxNotices, the
// oldest are dropped (the latest state is always delivered).
type blockNotices struct {
	mu   sync.Mutex
	list []blockNotice
	wake chan struct{}
}

type blockNotice struct {
	active bool
	reason string
}

const maxNotices = 16

// ownLogin is the SASL login of an ownConn.
type ownLogin struct {
	external       bool // EXTERNAL: the broker takes the user from the client certificate
	user, password string
}

func (l ownLogin) mechanism() string {
	if l.external {
		return "EXTERNAL"
	}
	return "PLAIN"
}

func (l ownLogin) response() []byte {
	if l.external {
		return nil
	}
	return []byte("\x00" + l.user + "\x00" + l.password)
}

// ownParams are what an ownConn handshake sends.
type ownParams struct {
	login      ownLogin
	vhost      string
	properties map[string]any // client properties; capabilities are added
	heartbeat  time.Duration  // asked for; the broker's proposal may lower it
	locale     string
	onBlocked  func(active bool, reason string)
}

// errLoginRefused is a broker that closed the socket at start-ok without a
// word (brokers not honouring authentication_failure_close).
var errLoginRefused = errors.New("rabbitmq: the broker closed the connection at login: username or password not allowed")

// errClosedByClient refuses writes after our connection.close.
var errClosedByClient = errors.New("rabbitmq: the connection has been closed; nothing was written")

// openOwn runs the handshake on sock, whose deadline bounds it, and
// returns the open connection with its goroutines running. On failure the
// socket is closed.
func openOwn(sock net.Conn, prm ownParams) (*ownConn, error) {
	c, err := handshake(sock, prm)
	if err != nil {
		_ = sock.Close()
		return nil, err
	}
	_ = sock.SetDeadline(time.Time{})
	c.wg.Add(2)
	go c.readLoop()
	go c.controlLoop()
	go c.noticeLoop()
	if c.heartbeat > 0 {
		c.wg.Add(1)
		go c.beat()
	}
	return c, nil
}

func handshake(sock net.Conn, prm ownParams) (*ownConn, error) {
	if _, err := sock.Write([]byte(protocolHeader)); err != nil {
		return nil, err
	}
	fr := newFrameReader(sock, handshakeFrameMax)
	expect := func(step string, method uint16) ([]byte, error) {
		f, err := fr.next()
		// A heartbeat may come at any point once tune is answered (RabbitMQ
		// sends one after tune-ok when open is slow): it says only that
		// the broker is there.
		for err == nil && f.typ == frameHeartbeat && f.channel == 0 {
			f, err = fr.next()
		}
		if err != nil {
			if step == "tune" && isClosedByPeer(err) {
				return nil, errLoginRefused
			}
			return nil, fmt.Errorf("rabbitmq: the connection ended during the handshake, waiting for connection.%s: %w", step, err)
		}
		class, m, rest, ok := methodID(f.payload)
		if f.typ != frameMethod || f.channel != 0 || !ok || class != classConnection {
			return nil, fmt.Errorf("rabbitmq: the broker sent frame type %d on channel %d during the handshake, where connection.%s belongs", f.typ, f.channel, step)
		}
		if m == methodConnectionClose {
			ca, ok := readClose(rest)
			if !ok {
				return nil, fmt.Errorf("rabbitmq: the broker closed the connection during the handshake with an unreadable connection.close")
			}
			_, _ = sock.Write(appendCloseOk(nil, 0))
			return nil, &transport.Error{Code: int(ca.code), Reason: ca.text, Server: true, Connection: true}
		}
		if m != method {
			return nil, fmt.Errorf("rabbitmq: the broker sent connection method %d during the handshake, where connection.%s belongs", m, step)
		}
		return rest, nil
	}

	p, err := expect("start", methodConnectionStart)
	if err != nil {
		return nil, err
	}
	start, ok := readStart(p)
	if !ok {
		return nil, errors.New("rabbitmq: the broker's connection.start cannot be read")
	}
	if start.major != 0 || start.minor != 9 {
		return nil, fmt.Errorf("rabbitmq: the broker speaks AMQP %d-%d, not 0-9", start.major, start.minor)
	}
	mech := prm.login.mechanism()
	if !hasWord(start.mechanisms, mech) {
		return nil, fmt.Errorf("rabbitmq: the broker does not offer the %s login (it offers %q); enable its %s mechanism (auth_mechanisms in rabbitmq.conf) or log in another way", mech, start.mechanisms, mech)
	}
	props := make(map[string]any, len(prm.properties)+1)
	for k, v := range prm.properties {
		props[k] = v
	}
	props["capabilities"] = map[string]any{
		"connection.blocked":           true,
		"consumer_cancel_notify":       true,
		"basic.nack":                   true,
		"publisher_confirms":           true,
		"authentication_failure_close": true,
	}
	locale := prm.locale
	if locale == "" {
		locale = "en_US"
	}
	out, err := appendStartOk(nil, props, mech, prm.login.response(), locale)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: cannot encode the client properties: %w", err)
	}
	if _, err := sock.Write(out); err != nil {
		return nil, err
	}

	p, err = expect("tune", methodConnectionTune)
	if err != nil {
		return nil, err
	}
	tune, ok := readTune(p)
	if !ok {
		return nil, errors.New("rabbitmq: the broker's connection.tune cannot be read")
	}
	chanMax := pick16(defaultChannelMaxRequest, tune.channelMax)
	frameMax := uint32(defaultFrameMax)
	if tune.frameMax != 0 && tune.frameMax < frameMax {
		frameMax = tune.frameMax
	}
	if frameMax < frameMinSize {
		return nil, fmt.Errorf("rabbitmq: the broker proposed frame_max %d, below AMQP's minimum of %d", frameMax, frameMinSize)
	}
	hb := heartbeatSeconds(prm.heartbeat, tune.heartbeat)
	out = appendTuneOk(nil, chanMax, frameMax, hb)
	out = appendOpen(out, prm.vhost)
	if _, err := sock.Write(out); err != nil {
		return nil, err
	}
	if _, err := expect("open-ok", methodConnectionOpenOk); err != nil {
		return nil, err
	}
	fr.max = int(frameMax) - 8
	c := &ownConn{
		sock: sock, fr: fr, frameMax: int(frameMax), chanMax: chanMax,
		heartbeat: time.Duration(hb) * time.Second, onBlocked: prm.onBlocked,
		chans: make(map[uint16]*ownPublisher), secretOk: make(chan struct{}, 1), done: make(chan struct{}),
		ctl: make(chan func(), ctlQueue), notices: blockNotices{wake: make(chan struct{}, 1)}, noticed: make(chan struct{}),
	}
	c.w = newHeldConn(sock)
	return c, nil
}

// heartbeatSeconds negotiates the heartbeat interval in seconds, as
// tune-ok carries it: asked is the client's wish (negative: off, which
// AMQP lets the client choose by answering 0; zero: the broker's
// proposal; a positive value is rounded up to whole seconds, at most
// 65535), proposed the broker's (0: none). A wish and a proposal both set
// give the smaller.
func heartbeatSeconds(asked time.Duration, proposed uint16) uint16 {
	if asked < 0 {
		return 0
	}
	want := uint16(min((asked+time.Second-1)/time.Second, 65535))
	return pick16(want, proposed)
}

// pick16 negotiates a limit where 0 means none: the smaller of two, or
// the one given.
func pick16(client, server uint16) uint16 {
	if client == 0 || server == 0 {
		return max(client, server)
	}
	return min(client, server)
}

func hasWord(list, w string) bool {
	for _, f := range strings.Fields(list) {
		if f == w {
			return true
		}
	}
	return false
}

func isClosedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "connection reset by peer")
}

// readLoop reads every frame until the socket ends, then ends the
// connection.
func (c *ownConn) readLoop() {
	defer c.wg.Done()
	var err error
	for {
		var f inFrame
		if f, err = c.fr.next(); err != nil {
			break
		}
		c.reads.Add(1)
		if err = c.dispatch(f); err != nil {
			break
		}
	}
	c.end(err)
}

// errCloseOk ends the reader at the broker's close-ok to our close.
var errCloseOk = errors.New("rabbitmq: closed")

// dispatch handles one frame.
func (c *ownConn) dispatch(f inFrame) error {
	if f.typ == frameHeartbeat {
		return nil
	}
	if f.channel == 0 {
		if f.typ != frameMethod {
			return fmt.Errorf("rabbitmq: the broker sent frame type %d on channel 0; the connection was closed", f.typ)
		}
		return c.connectionMethod(f.payload)
	}
	c.mu.Lock()
	p := c.chans[f.channel]
	c.mu.Unlock()
	if p == nil {
		return nil // a channel already let go of
	}
	switch f.typ {
	case frameMethod:
		return p.method(f.payload)
	case frameHeaderType:
		p.contentHeader(f.payload)
	}
	return nil // body frames (of a basic.return) are not needed
}

func (c *ownConn) connectionMethod(p []byte) error {
	class, method, rest, ok := methodID(p)
	if !ok || class != classConnection {
		return nil
	}
	switch method {
	case methodConnectionClose:
		ca, _ := readClose(rest)
		// The close-ok goes only if the socket is free: the reader waits
		// for no writer, and the broker closes its end anyway.
		ctx, cancel := context.WithTimeout(context.Background(), closeOkWait)
		c.w.tryUrgent(ctx, appendCloseOk(nil, 0), errClosedByClient)
		cancel()
		c.mu.Lock()
		if c.err == nil {
			c.err = &transport.Error{Code: int(ca.code), Reason: ca.text, Server: true, Connection: true}
		}
		c.mu.Unlock()
		return errCloseOk
	case methodConnectionCloseOk:
		return errCloseOk
	case methodConnectionBlocked:
		a := args{p: rest}
		c.notify(true, a.shortstr())
	case methodConnectionUnblock:
		c.notify(false, "")
	case methodUpdateSecretOk:
		select {
		case c.secretOk <- struct{}{}:
		default:
		}
	}
	return nil
}

// closeOkWait bounds the reader's write of a close-ok to the broker's
// connection.close.
const closeOkWait = time.Second

// control hands f to the control goroutine, which runs it in order with
// the others; the reader calls it and never waits. A full queue drops the
// connection.
func (c *ownConn) control(f func()) {
	select {
	case c.ctl <- f:
	default:
		c.fail(fmt.Errorf("rabbitmq: the broker sent more than %d channel closes and flow changes the publishing connection could not answer yet (a write the broker is not reading holds the socket); the connection was dropped", ctlQueue))
	}
}

// controlLoop runs what the reader handed over until the connection ends.
func (c *ownConn) controlLoop() {
	defer c.wg.Done()
	for {
		select {
		case f := <-c.ctl:
			f()
		case <-c.done:
			return
		}
	}
}

// notify queues a blocked notice for the notices goroutine (reader).
func (c *ownConn) notify(active bool, reason string) {
	if c.onBlocked == nil {
		return
	}
	n := &c.notices
	n.mu.Lock()
	if len(n.list) >= maxNotices {
		n.list = append(n.list[:0], n.list[len(n.list)-maxNotices+1:]...)
	}
	n.list = append(n.list, blockNotice{active, reason})
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// noticeLoop calls onBlocked with each notice, in order, until the
// connection ends.
func (c *ownConn) noticeLoop() {
	defer close(c.noticed)
	n := &c.notices
	var batch []blockNotice
	for {
		select {
		case <-n.wake:
		case <-c.done:
			return
		}
		n.mu.Lock()
		batch, n.list = n.list, batch[:0]
		n.mu.Unlock()
		for _, b := range batch {
			c.onBlocked(b.active, b.reason)
		}
	}
}

// end records why the connection ended, closes the socket and answers
// every publisher's pending publishes Lost.
func (c *ownConn) end(err error) {
	c.mu.Lock()
	if c.err == nil && !c.closing && err != errCloseOk {
		c.err = fmt.Errorf("rabbitmq: the publishing connection to the broker failed: %w", err)
	}
	c.ended = true
	chans := c.chans
	c.chans = map[uint16]*ownPublisher{}
	cause := c.err
	c.mu.Unlock()
	_ = c.w.Close()
	close(c.done)
	if cause == nil {
		cause = transport.ErrClosed
	}
	for _, p := range chans {
		p.finish(cause)
	}
}

// fail drops the connection with err as its reason.
func (c *ownConn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	_ = c.w.Close()
}

// beat writes a heartbeat every half interval and drops the connection
// when nothing has been read for two intervals.
func (c *ownConn) beat() {
	defer c.wg.Done()
	t := time.NewTicker(c.heartbeat / 2)
	defer t.Stop()
	last, quiet := c.reads.Load(), 0
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		if r := c.reads.Load(); r != last {
			last, quiet = r, 0
		} else if quiet++; quiet >= 4 {
			c.fail(fmt.Errorf("rabbitmq: the broker sent nothing for %s, two heartbeat intervals; the publishing connection was dropped", 2*c.heartbeat))
			return
		}
		// Never waits for another write: a write blocked on a socket the
		// broker stopped reading must not stop the silence being noticed.
		// Its own write is bounded by the interval: a heartbeat the broker
		// does not take within it drops the connection.
		ctx, cancel := context.WithTimeout(context.Background(), c.heartbeat)
		c.w.tryPut(ctx, heartbeatFrame[:])
		cancel()
	}
}

// Err is why the connection ended; nil while open and after closeWithin.
func (c *ownConn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// closeWithin sends connection.close, waits at most d for the broker's
// close-ok, then closes the socket and waits for the goroutines. Pending
// publishes are answered Lost. d bounds it all, a writer blocked on a
// socket the broker stopped reading included: the socket's write deadline
// is set first, before close waits for the socket, so the close never
// waits for the writer to give up on its own (the callback of a blocked
// notice still running at the deadline is not waited for).
func (c *ownConn) closeWithin(d time.Duration) error {
	deadline := time.Now().Add(d)
	c.w.closeBy(deadline)
	c.mu.Lock()
	already := c.closing || c.ended
	c.closing = true
	c.mu.Unlock()
	var err error
	if !already {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		werr := c.w.urgent(ctx, appendClose(nil, 0, replySuccess, "closed by the client"), errClosedByClient)
		switch {
		case werr == nil:
			select {
			case <-c.done:
			case <-ctx.Done():
				err = fmt.Errorf("rabbitmq: the broker did not answer the close within %s; the socket was dropped", d)
			}
		case isWaited(werr):
			err = fmt.Errorf("rabbitmq: a write the broker was not reading held the socket for the close's %s; the socket was dropped", d)
		}
		cancel()
	}
	_ = c.w.Close()
	<-c.done
	c.wg.Wait()
	t := time.NewTimer(max(time.Until(deadline), 0))
	select {
	case <-c.noticed:
	case <-t.C:
	}
	t.Stop()
	return err
}

// updateSecret hands the broker a new secret (connection.update-secret)
// and waits for its update-secret-ok, ctx, or the connection's end.
func (c *ownConn) updateSecret(ctx context.Context, secret, reason string) error {
	select {
	case <-c.secretOk:
	default:
	}
	if err := c.w.urgent(ctx, appendUpdateSecret(nil, secret, reason), nil); err != nil {
		return err
	}
	select {
	case <-c.secretOk:
		return nil
	case <-c.done:
		if err := c.Err(); err != nil {
			return err
		}
		return transport.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// publisher opens a channel for publishing, in confirm mode when confirm
// is set (channel.open and confirm.select are sent together), and waits
// for the broker's answers.
func (c *ownConn) publisher(ctx context.Context, confirm bool) (*ownPublisher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.ended || c.closing {
		err := c.err
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return nil, transport.ErrClosed
	}
	id, ok := c.allocLocked()
	if !ok {
		c.mu.Unlock()
		return nil, fmt.Errorf("rabbitmq: all %d channels of the publishing connection are open; close publishers first", c.chanMax)
	}
	p := newOwnPublisher(c, id, confirm)
	c.chans[id] = p
	c.mu.Unlock()

	out := appendChannelOpen(nil, id)
	want := 1
	if confirm {
		out = appendConfirmSelect(out, id)
		want = 2
	}
	if err := c.w.urgent(ctx, out, nil); err != nil {
		c.release(p)
		p.finish(transport.ErrClosed)
		if isWaited(err) {
			// Another write held the socket until ctx ended; nothing went.
			return nil, fmt.Errorf("rabbitmq: cannot open a publishing channel: %w", err)
		}
		return nil, fmt.Errorf("rabbitmq: cannot open a publishing channel: %w: %w", transport.ErrClosed, err)
	}
	for got := 0; got < want; {
		select {
		case <-p.replies:
			got++
		case <-p.done:
			if err := p.cause(); err != nil {
				return nil, err
			}
			return nil, transport.ErrClosed
		case <-ctx.Done():
			// The broker answers the open, then the close; the close waits
			// for the socket on the control goroutine, not here.
			c.control(p.sendClose)
			return nil, ctx.Err()
		}
	}
	return p, nil
}

// allocLocked finds a free channel number after the last one given.
func (c *ownConn) allocLocked() (uint16, bool) {
	limit := c.chanMax
	if limit == 0 {
		limit = 65535
	}
	for i := 0; i < int(limit); i++ {
		c.lastID = c.lastID%limit + 1
		if _, used := c.chans[c.lastID]; !used {
			return c.lastID, true
		}
	}
	return 0, false
}

// release forgets p's channel number (its close-ok has arrived).
func (c *ownConn) release(p *ownPublisher) {
	c.mu.Lock()
	if c.chans[p.id] == p {
		delete(c.chans, p.id)
	}
	c.mu.Unlock()
}
