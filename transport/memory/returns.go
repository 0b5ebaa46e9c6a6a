package memory

// Where a message that comes back to its queue goes, as RabbitMQ 4.3 puts
// it (measured on 4.3.6, docs/support.md): a classic queue puts it back at
// its original position, so messages handed back one by one, in any order,
// are delivered again in the order they were published; a quorum queue
// keeps the messages that came back in a queue of their own, delivered
// before any other and in the order they came back. A channel that ends
// returns its deliveries in the order they were delivered. RabbitMQ 3.10's
// quorum queues put a returned message behind the ready ones instead.

// putBackLocked puts e back among the ready messages where the queue's
// type puts a message that came back. The caller holds q.mu.
func (q *queue) putBackLocked(e entry) {
	i, n := 0, q.ready.len()
	if q.quorum {
		e.returned = true
		for i < n && q.ready.at(i).returned {
			i++
		}
	} else {
		for i < n && q.ready.at(i).offset < e.offset {
			i++
		}
	}
	q.ready.insert(i, e)
}

// at returns the i-th entry from the head; 0 ≤ i < len.
func (d *deque) at(i int) *entry { return &d.buf[(d.head+i)%len(d.buf)] }

// insert puts e at position i from the head (0 ≤ i ≤ len), moving the i
// entries before it one place towards the head. Returned messages land
// near the head, so i is small.
func (d *deque) insert(i int, e entry) {
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
