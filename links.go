package acemq

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// links owns a Conn's two broker connections (one for publishing, one for
// consuming, so a broker that blocks publishers does not stall consumers'
// acks), the address they were made to, and the generation that numbers
// each pair. It knows nothing of state, publishers or consumers.
type links struct {
	driver     transport.Driver
	tcfg       transport.Config
	clientName string
	redacted   string // the URL with its password masked, for errors

	mu        sync.Mutex
	gen       uint64
	pub, con  transport.Connection
	addrIndex int
}

// dial opens a publishing and a consuming connection, starting at address
// index start, without making them current (see adopt). onBlocked receives
// the publishing connection's blocked notices.
func (l *links) dial(ctx context.Context, start int, onBlocked func(active bool, reason string)) (pc, cc transport.Connection, idx int, err error) {
	pcfg := l.tcfg
	pcfg.Start = start
	pcfg.ConnectionName = l.clientName + " (publishing)"
	pcfg.OnBlocked = onBlocked
	pcfg.Purpose = transport.Publishing
	pc, idx, err = l.driver.Dial(ctx, pcfg)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("acemq: cannot connect to %s: %w", l.redacted, err)
	}
	ccfg := l.tcfg
	ccfg.Start = idx
	ccfg.ConnectionName = l.clientName + " (consuming)"
	ccfg.Purpose = transport.Consuming
	cc, _, err = l.driver.Dial(ctx, ccfg)
	if err != nil {
		_ = pc.Close()
		return nil, nil, 0, fmt.Errorf("acemq: cannot connect to %s: %w", l.redacted, err)
	}
	return pc, cc, idx, nil
}

// adopt makes a dialled pair current and returns its generation.
func (l *links) adopt(pc, cc transport.Connection, idx int) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	l.pub, l.con, l.addrIndex = pc, cc, idx
	return l.gen
}

// current returns the current pair.
func (l *links) current() (pc, cc transport.Connection) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pub, l.con
}

// generation numbers the current pair; each adopted dial makes a new one.
func (l *links) generation() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen
}

// nextStart is the address a recovery dials first: the one after the
// current pair's, so a lost node is tried last.
func (l *links) nextStart() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.tcfg.Addresses) <= 1 {
		return 0
	}
	return (l.addrIndex + 1) % len(l.tcfg.Addresses)
}

// channel opens a throwaway channel on the current consuming connection.
func (l *links) channel(ctx context.Context) (transport.Channel, error) {
	_, cc := l.current()
	return cc.Channel(ctx)
}

// closeCurrent closes the current pair, each within d (see closeBoth).
func (l *links) closeCurrent(d time.Duration) {
	pc, cc := l.current()
	closeBoth(pc, cc, d)
}

// loseCloseWait bounds the close handshake of connections being given up.
// The publishes still waiting on them are answered (lost) only when they
// end, and must be within 100ms of the loss (behaviour §4.1), so a peer
// that does not answer at once (partitioned, or blocked by an alarm) has
// its socket dropped instead.
const loseCloseWait = 25 * time.Millisecond

// closeBoth closes the two connections concurrently, each within d: when
// only one was lost the other may be blocked by the broker, which then
// never answers a close. It waits for the goroutine it starts.
func closeBoth(pc, cc transport.Connection, d time.Duration) {
	done := make(chan struct{})
	go func() {
		_ = transport.CloseWithin(cc, d)
		close(done)
	}()
	_ = transport.CloseWithin(pc, d)
	<-done
}
