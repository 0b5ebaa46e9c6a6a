package rabbitmq

import "github.com/acemq-go/acemq/transport"

// waiter is one publish awaiting the broker's answer.
type waiter struct {
	done      transport.ConfirmFunc
	key       returnKey
	mandatory bool
	returned  bool
	code      uint16
	text      string
}

// returnKey is what a basic.return says about the publish it returns: the
// message id, exchange and routing key. A return is attributed by the
// message id; the exchange and key keep publishes that reuse an id apart.
type returnKey struct {
	id, exchange, routingKey string
}

// pending is the table of unanswered publishes of one channel, keyed by the
// channel's publish sequence number, plus an index of mandatory publishes by
// message id, exchange and routing key so a basic.return finds its publish. It is not safe for
// concurrent use; the publisher guards it.
type pending struct {
	bySeq map[uint64]waiter
	// byID lists, oldest first, the sequence numbers of unanswered
	// mandatory publishes carrying each message id.
	byID map[returnKey][]uint64
}

func newPending() pending {
	return pending{bySeq: make(map[uint64]waiter, 256), byID: make(map[returnKey][]uint64)}
}

func (p *pending) add(seq uint64, w waiter) {
	p.bySeq[seq] = w
	if w.mandatory {
		p.byID[w.key] = append(p.byID[w.key], seq)
	}
}

// remove takes seq out of the table and returns its waiter.
func (p *pending) remove(seq uint64) (waiter, bool) {
	w, ok := p.bySeq[seq]
	if !ok {
		return w, false
	}
	delete(p.bySeq, seq)
	if w.mandatory {
		seqs := p.byID[w.key]
		for i, s := range seqs {
			if s == seq {
				seqs = append(seqs[:i], seqs[i+1:]...)
				break
			}
		}
		if len(seqs) == 0 {
			delete(p.byID, w.key)
		} else {
			p.byID[w.key] = seqs
		}
	}
	return w, true
}

// markReturned attributes a basic.return to the oldest unanswered mandatory
// publish with the same message id, exchange and routing key that has not
// already been returned. It reports whether one was found.
func (p *pending) markReturned(k returnKey, code uint16, text string) bool {
	for _, seq := range p.byID[k] {
		w := p.bySeq[seq]
		if w.returned {
			continue
		}
		w.returned, w.code, w.text = true, code, text
		p.bySeq[seq] = w
		return true
	}
	return false
}

// takeAll empties the table and returns what it held.
func (p *pending) takeAll() map[uint64]waiter {
	all := p.bySeq
	p.bySeq = nil
	p.byID = nil
	return all
}
