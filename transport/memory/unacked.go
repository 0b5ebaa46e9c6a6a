package memory

// unacked is one delivery awaiting settlement on a channel.
type unacked struct {
	e    entry
	q    *queue
	c    *consumer // nil for basic.get
	live bool
}

// unackedList holds a channel's outstanding deliveries indexed by delivery
// tag. Tags are issued in order and mostly settled in order, so it is a
// slice with a moving base: O(1) add and lookup, compacted from the front.
// The channel's mutex guards it.
type unackedList struct {
	slots []unacked
	base  uint64 // tag of slots[0]
	next  uint64 // next tag to issue
	live  int
}

func (l *unackedList) add(u unacked) uint64 {
	if l.next == 0 {
		l.next, l.base = 1, 1
	}
	u.live = true
	l.slots = append(l.slots, u)
	l.live++
	tag := l.next
	l.next++
	return tag
}

// take removes the delivery with tag, reporting whether it was outstanding.
func (l *unackedList) take(tag uint64) (unacked, bool) {
	if tag < l.base || tag >= l.base+uint64(len(l.slots)) {
		return unacked{}, false
	}
	s := &l.slots[tag-l.base]
	if !s.live {
		return unacked{}, false
	}
	u := *s
	*s = unacked{}
	l.live--
	i := 0
	for i < len(l.slots) && !l.slots[i].live {
		i++
	}
	if i > 0 {
		if i == len(l.slots) {
			l.slots = l.slots[:0]
		} else if i > 1024 && i > len(l.slots)/2 {
			n := copy(l.slots, l.slots[i:])
			l.slots = l.slots[:n]
		} else {
			l.slots = l.slots[i:]
		}
		l.base += uint64(i)
	}
	return u, true
}

// drain removes and returns every outstanding delivery in tag order.
func (l *unackedList) drain() []unacked {
	out := make([]unacked, 0, l.live)
	for _, s := range l.slots {
		if s.live {
			out = append(out, s)
		}
	}
	l.base += uint64(len(l.slots))
	l.slots, l.live = nil, 0
	return out
}
