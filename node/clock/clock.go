package clock

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Clock is a source of time. Implementations are safe for concurrent use.
type Clock interface {
	// Now returns the clock's current time.
	Now() time.Time
	// NewTimer returns a timer that sends the clock's time on its channel
	// once d of the clock's time has passed. d <= 0 fires at once.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C returns the channel on which the timer sends the clock's time once,
	// when it fires. The channel has a buffer of one and is never closed.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It returns false if the timer has
	// already fired or been stopped. It does not drain the channel.
	Stop() bool
}

// Real returns the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// ScaledClock runs virtual time Factor times faster than the wall clock. Make
// one with [Scaled].
type ScaledClock struct {
	origin    time.Time // virtual time at start
	realStart time.Time // wall time at start (carries the monotonic reading)
	factor    float64
	gate      atomic.Pointer[gate] // nil: never held
}

// gate is a hold of a ScaledClock: its time stops at hold (if held) and
// the wall time spent stopped, paused, does not count.
type gate struct {
	paused time.Duration
	hold   time.Time
	held   bool
}

// Scaled returns a clock whose time is origin at the moment of the call and
// then advances factor times faster than the wall clock. factor must be > 0
// (Scaled panics otherwise: it is a programming error, config validation
// rejects it first); factor 1 is the wall clock's pace shifted to origin.
// A zero origin means the wall clock's time at the call.
func Scaled(origin time.Time, factor float64) *ScaledClock {
	if !(factor > 0) {
		panic("clock: Scaled factor must be > 0")
	}
	now := time.Now()
	if origin.IsZero() {
		origin = now.Round(0)
	}
	return &ScaledClock{origin: origin, realStart: now, factor: factor}
}

// Now returns the virtual time.
func (s *ScaledClock) Now() time.Time {
	g := s.gate.Load()
	if g == nil {
		return s.origin.Add(s.Virtual(time.Since(s.realStart)))
	}
	t := s.origin.Add(s.Virtual(time.Since(s.realStart) - g.paused))
	if g.held && t.After(g.hold) {
		return g.hold
	}
	return t
}

// HoldAt lets the clock run until at and stop there until the next call:
// a test harness makes events due at one time happen at that very time,
// however long they take in wall time. A later at (or a zero one, which
// lets the clock run on) resumes from where it stopped: the wall time it
// was stopped does not count. Timers fire by the held time. Not for
// concurrent callers of HoldAt (Now and timers may run meanwhile).
func (s *ScaledClock) HoldAt(at time.Time) {
	var g gate
	if old := s.gate.Load(); old != nil {
		g = *old
		if old.held && s.origin.Add(s.Virtual(time.Since(s.realStart)-old.paused)).After(old.hold) {
			// Stopped at old.hold: count the wall time since it got
			// there as paused.
			g.paused = time.Since(s.realStart) - s.Wall(old.hold.Sub(s.origin))
		}
	}
	g.hold, g.held = at, !at.IsZero()
	s.gate.Store(&g)
}

// Factor returns how many times faster than the wall clock the clock runs.
func (s *ScaledClock) Factor() float64 { return s.factor }

// Wall converts a duration of virtual time into wall-clock time.
func (s *ScaledClock) Wall(virtual time.Duration) time.Duration {
	return time.Duration(float64(virtual) / s.factor)
}

// Virtual converts a duration of wall-clock time into virtual time.
func (s *ScaledClock) Virtual(wall time.Duration) time.Duration {
	return time.Duration(float64(wall) * s.factor)
}

// NewTimer returns a timer that fires after d of virtual time.
func (s *ScaledClock) NewTimer(d time.Duration) Timer {
	t := &funcTimer{c: make(chan time.Time, 1)}
	if s.gate.Load() == nil {
		t.t = time.AfterFunc(s.Wall(d), func() {
			select {
			case t.c <- s.Now():
			default:
			}
		})
		return t
	}
	// A held clock: the wall time may pass before the virtual time does;
	// the timer waits until the clock itself has reached its time.
	due := s.Now().Add(d)
	var fire func()
	fire = func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.stopped {
			return
		}
		if now := s.Now(); now.Before(due) {
			t.t = time.AfterFunc(max(s.Wall(due.Sub(now)), time.Millisecond), fire)
			return
		}
		t.stopped = true
		select {
		case t.c <- s.Now():
		default:
		}
	}
	t.mu.Lock()
	t.t = time.AfterFunc(s.Wall(d), fire)
	t.mu.Unlock()
	return t
}

type funcTimer struct {
	mu      sync.Mutex // guards t and stopped of a held clock's timer
	t       *time.Timer
	stopped bool
	c       chan time.Time
}

func (f *funcTimer) C() <-chan time.Time { return f.c }

func (f *funcTimer) Stop() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	f.stopped = true
	return f.t.Stop()
}

// Manual is a clock that moves only when told to. The zero value is not
// usable; make one with [NewManual].
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

// NewManual returns a Manual clock at the given time.
func NewManual(now time.Time) *Manual { return &Manual{now: now} }

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// NewTimer returns a timer that fires when Advance moves the clock to or past
// Now()+d.
func (m *Manual) NewTimer(d time.Duration) Timer {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &manualTimer{m: m, at: m.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.fired = true
		t.c <- m.now
		return t
	}
	m.timers = append(m.timers, t)
	return t
}

// Advance moves the clock forward by d and fires, in order of their due
// times, every timer that is due. A negative d is ignored.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d > 0 {
		m.now = m.now.Add(d)
	}
	sort.SliceStable(m.timers, func(i, j int) bool { return m.timers[i].at.Before(m.timers[j].at) })
	kept := m.timers[:0]
	for _, t := range m.timers {
		if t.at.After(m.now) {
			kept = append(kept, t)
			continue
		}
		t.fired = true
		t.c <- m.now
	}
	clear(m.timers[len(kept):])
	m.timers = kept
}

// Waiters returns the number of timers that have neither fired nor been
// stopped. Tests use it to wait until a goroutine has armed its timer.
func (m *Manual) Waiters() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.timers)
}

type manualTimer struct {
	m     *Manual
	at    time.Time
	c     chan time.Time
	fired bool // guarded by m.mu
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if t.fired {
		return false
	}
	for i, x := range t.m.timers {
		if x == t {
			t.m.timers = append(t.m.timers[:i], t.m.timers[i+1:]...)
			t.fired = true // stopped: never fires
			return true
		}
	}
	return false
}
