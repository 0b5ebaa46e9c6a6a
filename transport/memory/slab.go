package memory

// slab carves message copies out of larger allocations, so a publish
// costs no allocation of its own in steady state. A chunk is freed by the
// garbage collector once every message carved from it is gone, which in a
// FIFO broker happens soon after. It is not safe for concurrent use; each
// publisher owns one, guarded by its publish mutex.
type slab struct {
	bytes []byte
	msgs  []message
}

const (
	slabBytes   = 64 << 10
	slabMaxBody = 4 << 10 // larger bodies get their own allocation
	slabMsgs    = 128
)

// body returns a private copy of b.
func (s *slab) body(b []byte) []byte {
	if b == nil {
		return nil
	}
	n := len(b)
	if n > slabMaxBody {
		return append(make([]byte, 0, n), b...)
	}
	if len(s.bytes) < n {
		s.bytes = make([]byte, slabBytes)
	}
	out := s.bytes[:n:n]
	s.bytes = s.bytes[n:]
	copy(out, b)
	return out
}

// message returns a zeroed message.
func (s *slab) message() *message {
	if len(s.msgs) == 0 {
		s.msgs = make([]message, slabMsgs)
	}
	m := &s.msgs[0]
	s.msgs = s.msgs[1:]
	return m
}
