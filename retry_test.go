package acemq

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestRetryZeroPolicyBehavesAsNoRetry(t *testing.T) {
	var zero RetryPolicy
	none := NoRetry()
	if zero.attemptLimit() != 1 || none.attemptLimit() != 1 {
		t.Fatalf("MaxAttempts zero=%d none=%d, want 1", zero.attemptLimit(), none.attemptLimit())
	}
	for _, p := range []RetryPolicy{zero, none} {
		if p.Err() != nil || len(p.Schedule()) != 0 || len(p.BrokerDelays()) != 0 || p.retries(1, 0, false) {
			t.Errorf("%v does not behave as NoRetry", p)
		}
		if p.brokerThreshold() != defaultBrokerWaitThreshold || p.jitterFactor() != 0 || p.String() != "none()" {
			t.Errorf("%v: threshold %v jitter %v", p, p.brokerThreshold(), p.jitterFactor())
		}
	}
}

func TestPolicyInvalidValuesReportConfigurationError(t *testing.T) {
	cases := []struct {
		p      RetryPolicy
		option string
	}{
		{Fixed(0, time.Second), "Fixed(attempts)"},
		{Fixed(3, -time.Second), "Fixed(delay)"},
		{Exponential(-1, time.Second, 0), "Exponential(attempts)"},
		{Exponential(3, -time.Second, 0), "Exponential(initial)"},
		{NoRetry().GiveUpAfter(-time.Second), "GiveUpAfter"},
		{Fixed(2, time.Second).WithJitter(1), "WithJitter"},
		{Fixed(2, time.Second).WithJitter(-0.1), "WithJitter"},
		{Fixed(2, time.Second).WithJitter(math.NaN()), "WithJitter"},
		{Fixed(2, time.Second).WaitInBrokerFrom(-1), "WaitInBrokerFrom"},
		// The first invalid value is the one reported.
		{Fixed(0, time.Second).WithJitter(2), "Fixed(attempts)"},
	}
	for _, c := range cases {
		var ce *ConfigurationError
		err := c.p.Err()
		if !errors.As(err, &ce) || ce.Option != c.option {
			t.Errorf("%v: Err() = %v, want a ConfigurationError for %s", c.p, err, c.option)
			continue
		}
		if !strings.HasPrefix(err.Error(), "acemq: ") {
			t.Errorf("%q does not start with acemq: ", err)
		}
		// Nothing panics on an invalid policy.
		_ = c.p.Schedule()
		_, _ = c.p.delayFor(1)
		_ = c.p.retries(1, 0, true)
		_ = c.p.BrokerDelays()
	}
	if err := Fixed(2, time.Second).WithJitter(0.99).Err(); err != nil {
		t.Errorf("jitter 0.99 refused: %v", err)
	}
}

func TestRungCollisionRefusesDelaysSharingAName(t *testing.T) {
	p := Fixed(2, time.Second).WaitInBrokerFrom(time.Second)
	if err := p.Err(); err != nil {
		t.Fatalf("single rung refused: %v", err)
	}
	// 1000 and 1500 ms both render "1s" with different TTLs. Build them
	// through an exponential whose cap is 1.5 s: 1s, 1.5s (capped).
	p = Exponential(3, time.Second, 1500*time.Millisecond).WaitInBrokerFrom(time.Second)
	const want = "acemq: retry delays 1s and 1.5s would both wait on queue {q}.retry.1s with different TTLs; use delays that are whole seconds"
	err := p.Err()
	if err == nil || err.Error() != want {
		t.Fatalf("Err() = %v,\nwant %s", err, want)
	}
	var ce *ConfigurationError
	if !errors.As(err, &ce) {
		t.Errorf("a rung collision is not a ConfigurationError")
	}
	named := p.rungCollision("orders.new")
	if named == nil || !strings.Contains(named.Error(), "queue orders.new.retry.1s ") {
		t.Errorf("rungCollision(orders.new) = %v", named)
	}
	// 250 and 500 ms both render "0s".
	p = Exponential(3, 250*time.Millisecond, 500*time.Millisecond).WaitInBrokerFrom(time.Millisecond)
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "{q}.retry.0s") {
		t.Errorf("250/500 ms: Err() = %v", err)
	}
	// Below the threshold nothing is a rung, so nothing collides.
	if err := Exponential(3, time.Second, 1500*time.Millisecond).Err(); err != nil {
		t.Errorf("consumer-held delays collided: %v", err)
	}
}

func TestRetryDelayOutsideScheduleIsZero(t *testing.T) {
	p := Fixed(3, time.Minute)
	for _, a := range []int{-1, 0, 3, 4} {
		if d, b := p.delayFor(a); d != 0 || b {
			t.Errorf("Delay(%d) = %v, %v", a, d, b)
		}
	}
	if d, b := p.delayFor(2); d != time.Minute || !b {
		t.Errorf("Delay(2) = %v, %v", d, b)
	}
}

func TestRetryExponentialUncappedSaturates(t *testing.T) {
	p := Exponential(200, time.Second, 0)
	s := p.Schedule()
	for i := 1; i < len(s); i++ {
		if s[i] < s[i-1] {
			t.Fatalf("schedule decreases at %d: %v < %v", i, s[i], s[i-1])
		}
	}
	if s[len(s)-1] != time.Duration(math.MaxInt64) {
		t.Errorf("last delay %v, want saturation", s[len(s)-1])
	}
	// A huge attempt count is cheap to ask about.
	big := Exponential(math.MaxInt32, time.Second, time.Hour)
	if d, _ := big.delayFor(math.MaxInt32 - 1); d != time.Hour {
		t.Errorf("Delay at the end = %v", d)
	}
	if got := len(big.BrokerDelays()); got != 8 { // 32s … 2048s, then 1h
		t.Errorf("BrokerDelays = %v", big.BrokerDelays())
	}
}

func TestRungDelayForRoundsUpToTheNextRung(t *testing.T) {
	p := Exponential(6, 10*time.Second, 5*time.Minute) // rungs 40s, 80s, 160s
	cases := map[time.Duration]time.Duration{
		time.Second:      40 * time.Second,
		40 * time.Second: 40 * time.Second,
		41 * time.Second: 80 * time.Second,
		80 * time.Second: 80 * time.Second,
		time.Hour:        160 * time.Second,
	}
	for in, want := range cases {
		if got := p.rungDelayFor(in); got != want {
			t.Errorf("rungDelayFor(%v) = %v, want %v", in, got, want)
		}
	}
	if got := NoRetry().rungDelayFor(time.Minute); got != 0 {
		t.Errorf("no rungs: %v", got)
	}
}

func TestPolicyString(t *testing.T) {
	cases := map[string]RetryPolicy{
		"exponential(6, 10s, 5m0s)": Exponential(6, 10*time.Second, 5*time.Minute),
		"fixed(4, 30s)":             Fixed(4, 30*time.Second),
		"none()":                    NoRetry(),
		"exponential(5, 1s, 24h0m0s).giveUpAfter(2m0s)":     Exponential(5, time.Second, 24*time.Hour).GiveUpAfter(2 * time.Minute),
		"fixed(2, 1s).withJitter(0.1).waitInBrokerFrom(0s)": Fixed(2, time.Second).WithJitter(0.1).WaitInBrokerFrom(0),
	}
	for want, p := range cases {
		if got := p.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

func TestPolicyConsumerWaitClampsSamples(t *testing.T) {
	p := Exponential(3, time.Second, 0)
	if w := p.consumerWait(time.Second, -5); w != 800*time.Millisecond {
		t.Errorf("u < 0: %v", w)
	}
	if w := p.consumerWait(time.Second, 7); w != 1200*time.Millisecond {
		t.Errorf("u > 1: %v", w)
	}
	if w := p.consumerWait(0, 0.5); w != time.Millisecond {
		t.Errorf("floor: %v", w)
	}
}
