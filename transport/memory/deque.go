package memory

// entry is one message sitting in a queue: the shared immutable message
// plus what is particular to this queue's copy.
type entry struct {
	m           *message
	expireAt    int64 // unix nanoseconds; 0 means never
	redelivered bool
	// returned: it came back to a quorum queue and waits among the
	// returned messages, which go first, in returnSeq order (returns.go).
	// Both stay set while a consumer holds it, so that an entry the
	// application never saw goes back to its place (restoreLocked).
	returned   bool
	returnSeq  int64
	deliveries int32 // times delivered from this queue (x-acquired-count is one less)
	failures   int32 // counted returns (x-delivery-count; see queue.returnLocked)
	// offset is its position: in a stream, its offset; in any other
	// queue, the order the queue received it in (where a classic queue
	// puts it back, returns.go).
	offset int64
}

// deque is a growable ring of entries: O(1) push and pop at both ends and
// no allocation in steady state. It is not safe for concurrent use; the
// owning queue's mutex guards it.
type deque struct {
	buf  []entry
	head int
	n    int
}

func (d *deque) len() int { return d.n }

func (d *deque) grow() {
	size := len(d.buf) * 2
	if size == 0 {
		size = 64
	}
	nb := make([]entry, size)
	for i := 0; i < d.n; i++ {
		nb[i] = d.buf[(d.head+i)%len(d.buf)]
	}
	d.buf, d.head = nb, 0
}

func (d *deque) pushBack(e entry) {
	if d.n == len(d.buf) {
		d.grow()
	}
	d.buf[(d.head+d.n)%len(d.buf)] = e
	d.n++
}

// front returns the head entry; the deque must not be empty.
func (d *deque) front() *entry { return &d.buf[d.head] }

func (d *deque) popFront() entry {
	e := d.buf[d.head]
	d.buf[d.head] = entry{}
	d.head = (d.head + 1) % len(d.buf)
	d.n--
	return e
}

// clear empties the deque, returning how many entries it held.
func (d *deque) clear() int {
	n := d.n
	for i := 0; i < d.n; i++ {
		d.buf[(d.head+i)%len(d.buf)] = entry{}
	}
	d.head, d.n = 0, 0
	return n
}
