package memory

import "sort"

// Where a message that comes back to its queue goes, as RabbitMQ 4.3 puts
// it (measured on 4.3.6, docs/support.md): a classic queue puts it back at
// its original position, so messages handed back one by one, in any order,
// are delivered again in the order they were published; a quorum queue
// keeps the messages that came back in a queue of their own, delivered
// before any other and in the order they came back. A channel that ends
// returns its deliveries in the order they were delivered. RabbitMQ 3.10's
// quorum queues put a returned message behind the ready ones instead.
//
// The ready deque is kept in that order: on a quorum queue the returned
// entries first, by returnSeq, then the others by offset; on a classic
// queue every entry by offset.

// putBackLocked puts e, a delivery the application had and handed back,
// among the ready messages where the queue's type puts a message that
// came back. The caller holds q.mu.
func (q *queue) putBackLocked(e entry) {
	if q.quorum {
		e.returned = true
		e.returnSeq = q.returns
		q.returns++
		q.ready.insert(q.returnedLocked(), e)
		return
	}
	q.ready.insert(q.positionLocked(0, q.ready.len(), e), e)
}

// restoreLocked puts e, an entry a consumer had taken and the application
// never saw, back where it was taken from: the broker never delivered it,
// so nothing about its place changes. The caller holds q.mu.
func (q *queue) restoreLocked(e entry) {
	if !q.quorum {
		q.ready.insert(q.positionLocked(0, q.ready.len(), e), e)
		return
	}
	k := q.returnedLocked()
	if e.returned {
		i := sort.Search(k, func(i int) bool { return q.ready.at(i).returnSeq > e.returnSeq })
		q.ready.insert(i, e)
		return
	}
	q.ready.insert(q.positionLocked(k, q.ready.len(), e), e)
}

// returnedLocked is how many entries at the head are returned ones (on a
// quorum queue; 0 on any other).
func (q *queue) returnedLocked() int {
	if !q.quorum {
		return 0
	}
	return sort.Search(q.ready.len(), func(i int) bool { return !q.ready.at(i).returned })
}

// positionLocked is where e goes by offset among ready entries [lo, hi),
// which are in offset order.
func (q *queue) positionLocked(lo, hi int, e entry) int {
	return lo + sort.Search(hi-lo, func(i int) bool { return q.ready.at(lo+i).offset > e.offset })
}

// at returns the i-th entry from the head; 0 ≤ i < len.
func (d *deque) at(i int) *entry { return &d.buf[(d.head+i)%len(d.buf)] }

// insert puts e at position i from the head (0 ≤ i ≤ len), moving the i
// entries before it one place towards the head. Returned messages land
// near the head, so i is small.
func (d *deque) insert(i int, e entry) {
	if i == d.n {
		d.pushBack(e)
		return
	}
	if d.n == len(d.buf) {
		d.grow()
	}
	d.head = (d.head - 1 + len(d.buf)) % len(d.buf)
	d.n++
	for j := 0; j < i; j++ {
		*d.at(j) = *d.at(j + 1)
	}
	*d.at(i) = e
}
