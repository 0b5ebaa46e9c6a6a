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
// slice window slots[head:] whose first element has tag base: O(1) add and
// lookup, settled slots dropped from the front and the window slid back
// when it has moved far. The channel's mutex guards it.
type unackedList struct {
	slots []unacked
	head  int
	base  uint64 // tag of slots[head]
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
	n := uint64(len(l.slots) - l.head)
	if tag < l.base || tag >= l.base+n {
		return unacked{}, false
	}
	s := &l.slots[l.head+int(tag-l.base)]
	if !s.live {
		return unacked{}, false
	}
	u := *s
	*s = unacked{}
	l.live--
	for l.head < len(l.slots) && !l.slots[l.head].live {
		l.head++
		l.base++
	}
	switch {
	case l.head == len(l.slots):
		l.slots, l.head = l.slots[:0], 0
	case l.head > 1024 && l.head*2 > len(l.slots):
		k := copy(l.slots, l.slots[l.head:])
		clear(l.slots[k:])
		l.slots, l.head = l.slots[:k], 0
	}
	return u, true
}

// drain removes and returns every outstanding delivery in tag order.
func (l *unackedList) drain() []unacked {
	out := make([]unacked, 0, l.live)
	for _, s := range l.slots[l.head:] {
		if s.live {
			out = append(out, s)
		}
	}
	l.base += uint64(len(l.slots) - l.head)
	l.slots, l.head, l.live = nil, 0, 0
	return out
}
