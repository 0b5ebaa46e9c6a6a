package acemq

import (
	"context"
	"testing"
	"time"
)

func TestPermitsWaitIdleWakesAtZeroWithoutPolling(t *testing.T) {
	p := newPermits(2)
	first, second, third := p.tryAcquire(), p.tryAcquire(), p.tryAcquire()
	if !first || !second || third {
		t.Fatal("two permits, then none")
	}
	done := make(chan struct{})
	go func() {
		p.waitIdle(context.Background(), time.Now().Add(time.Hour))
		close(done)
	}()
	p.release()
	select {
	case <-done:
		t.Fatal("waitIdle returned with a permit still taken")
	case <-time.After(20 * time.Millisecond): // a wake-up that must not come
	}
	p.release()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("waitIdle did not return when the last permit came back")
	}
	if p.outstanding() != 0 {
		t.Fatalf("outstanding %d", p.outstanding())
	}
	// The deadline bounds the wait.
	p.tryAcquire()
	start := time.Now()
	p.waitIdle(context.Background(), time.Now().Add(30*time.Millisecond))
	if time.Since(start) > 5*time.Second {
		t.Fatal("waitIdle ignored its deadline")
	}
	if err := p.acquire(context.Background(), time.After(time.Millisecond)); err != nil {
		t.Fatalf("acquire with a free permit: %v", err)
	}
	if err := p.acquire(context.Background(), time.After(time.Millisecond)); err != errCeiling {
		t.Fatalf("acquire at the ceiling = %v, want errCeiling", err)
	}
}
