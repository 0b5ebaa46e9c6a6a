package saga

import (
	"sort"
	"sync"
	"time"
)

// fakeClock is a Clock the test moves by hand: Advance runs the functions
// whose time came, in order, on the test's goroutine.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at   time.Time
	f    func()
	done bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.done
		t.done = true
		return was
	}
}

// Advance moves the clock on by d, running each timer due on the way at
// its own time.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
		var due *fakeTimer
		for _, t := range c.timers {
			if !t.done && !t.at.After(end) {
				due = t
				break
			}
		}
		if due == nil {
			c.now = end
			live := c.timers[:0]
			for _, t := range c.timers {
				if !t.done {
					live = append(live, t)
				}
			}
			c.timers = live
			c.mu.Unlock()
			return
		}
		due.done = true
		if due.at.After(c.now) {
			c.now = due.at
		}
		c.mu.Unlock()
		due.f()
	}
}

// skewedClock is the system's clock off by a fixed amount: a host whose
// clock is wrong.
type skewedClock struct{ by time.Duration }

func (s skewedClock) Now() time.Time { return time.Now().Add(s.by) }

func (s skewedClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
