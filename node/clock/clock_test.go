package clock

import (
	"testing"
	"time"
)

func TestScaledRunsFaster(t *testing.T) {
	origin := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := Scaled(origin, 1000)
	// An hour of virtual time is 3.6 s of wall time: generous for a loaded
	// machine.
	if got := c.Now(); got.Before(origin) || got.Sub(origin) > time.Hour {
		t.Fatalf("Now right after Scaled = %v, want close to %v", got, origin)
	}
	start := time.Now()
	tm := c.NewTimer(10 * time.Second) // 10 ms of wall time
	select {
	case v := <-tm.C():
		if v.Sub(origin) < 10*time.Second {
			t.Errorf("timer sent virtual time %v, want >= origin+10s", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("scaled timer did not fire")
	}
	if wall := time.Since(start); wall > 5*time.Second {
		t.Errorf("10 virtual seconds at x1000 took %v of wall time", wall)
	}
	if got := c.Wall(time.Hour); got != 3600*time.Millisecond {
		t.Errorf("Wall(1h) = %v, want 3.6s", got)
	}
	if got := c.Virtual(time.Second); got != 1000*time.Second {
		t.Errorf("Virtual(1s) = %v, want 1000s", got)
	}
}

func TestScaledStop(t *testing.T) {
	c := Scaled(time.Time{}, 1)
	tm := c.NewTimer(time.Hour)
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	if tm.Stop() {
		t.Fatal("second Stop returned true")
	}
}

func TestManual(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewManual(t0)
	a := m.NewTimer(5 * time.Second)
	b := m.NewTimer(2 * time.Second)
	stopped := m.NewTimer(3 * time.Second)
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	if m.Waiters() != 2 {
		t.Fatalf("Waiters = %d, want 2", m.Waiters())
	}
	m.Advance(2 * time.Second)
	select {
	case v := <-b.C():
		if !v.Equal(t0.Add(2 * time.Second)) {
			t.Errorf("b fired with %v", v)
		}
	default:
		t.Fatal("b did not fire at +2s")
	}
	select {
	case <-a.C():
		t.Fatal("a fired early")
	default:
	}
	m.Advance(10 * time.Second)
	select {
	case <-a.C():
	default:
		t.Fatal("a did not fire at +12s")
	}
	select {
	case <-stopped.C():
		t.Fatal("stopped timer fired")
	default:
	}
	if a.Stop() {
		t.Error("Stop of a fired timer returned true")
	}
	now := m.NewTimer(0)
	select {
	case <-now.C():
	default:
		t.Fatal("NewTimer(0) did not fire at once")
	}
}

func TestRealClock(t *testing.T) {
	c := Real()
	tm := c.NewTimer(time.Millisecond)
	select {
	case <-tm.C():
	case <-time.After(2 * time.Second):
		t.Fatal("real timer did not fire")
	}
	if d := time.Since(c.Now()); d < 0 || d > time.Second {
		t.Errorf("Real().Now() off by %v", d)
	}
}

// TestScaledHoldAt: a held clock stops at the hold, its timers wait for it,
// and it resumes from the hold, not from where the wall clock would put it.
func TestScaledHoldAt(t *testing.T) {
	origin := time.Unix(1_000_000, 0)
	c := Scaled(origin, 1000) // 1 virtual second per wall millisecond
	hold := origin.Add(20 * time.Second)
	c.HoldAt(hold)
	tm := c.NewTimer(30 * time.Second) // due after the hold
	deadline := time.Now().Add(5 * time.Second)
	for c.Now().Before(hold) {
		if time.Now().After(deadline) {
			t.Fatal("the clock never reached its hold")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // 50 virtual seconds, were it running
	if got := c.Now(); !got.Equal(hold) {
		t.Fatalf("held clock at %v, want %v", got, hold)
	}
	select {
	case <-tm.C():
		t.Fatal("a timer due after the hold fired while the clock was held")
	default:
	}
	c.HoldAt(origin.Add(40 * time.Second))
	if got := c.Now(); got.Before(hold) || got.After(hold.Add(5*time.Second)) {
		t.Fatalf("resumed clock at %v, want just after the hold %v", got, hold)
	}
	select {
	case at := <-tm.C():
		if at.Before(origin.Add(30 * time.Second)) {
			t.Errorf("timer fired at %v, before its time", at)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("timer did not fire after the clock resumed")
	}
	if tm.Stop() {
		t.Error("Stop of a fired timer returned true")
	}
	c.HoldAt(time.Time{})
	if !c.Now().After(hold) {
		t.Error("released clock did not run on")
	}
}
