package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

// Generous deadlines for eventual consistency: memberlist on loopback with
// the timers of testConfig converges in well under a second and declares a
// silent member dead in a few seconds.
const (
	convergeWithin = 10 * time.Second
	deathWithin    = 15 * time.Second
)

// site is one test site: a Membership and the digest it advertises.
type site struct {
	*Membership
	mu     sync.Mutex
	digest Digest
}

// setDigest changes what the site's local digest function returns.
func (s *site) setDigest(f func(*Digest)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.digest)
}

func (s *site) currentDigest() Digest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.digest
}

// testLogger discards logs unless DISCOVERY_TEST_LOG is set. (Logging to
// t.Log is unsafe: memberlist's goroutines may log after the test ends.)
func testLogger() *slog.Logger {
	if os.Getenv("DISCOVERY_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testConfig is DefaultLocalConfig with faster failure detection.
func testConfig(name string) Config {
	cfg := DefaultLocalConfig(name)
	cfg.ProbeInterval = 200 * time.Millisecond
	cfg.RefreshInterval = 200 * time.Millisecond
	cfg.UpdateTimeout = 2 * time.Second
	cfg.Logger = testLogger()
	return cfg
}

// startSite creates a site named name on 127.0.0.1 with an OS-assigned port;
// cfgFn, if not nil, edits its config. It is shut down when the test ends.
func startSite(t *testing.T, name string, cfgFn func(*Config)) *site {
	t.Helper()
	cfg := testConfig(name)
	if cfgFn != nil {
		cfgFn(&cfg)
	}
	s := &site{digest: Digest{
		Addr:    fmt.Sprintf("127.0.0.1:%d", 9000+len(name)),
		Procs:   64,
		Policy:  "easy",
		FreeNow: 8, Free1h: 16, Free4h: 32, Free24h: 64,
	}}
	m, err := New(cfg, s.currentDigest)
	if err != nil {
		t.Fatalf("New(%s): %v", name, err)
	}
	s.Membership = m
	t.Cleanup(func() { _ = m.Shutdown() })
	return s
}

// eventually polls cond until it holds or within has passed.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// member returns the member named name as s sees it.
func (s *site) member(name string) (Member, bool) {
	for _, m := range s.Members() {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// sees reports whether s sees every named site in state want.
func (s *site) sees(want MemberState, names ...string) bool {
	for _, n := range names {
		if m, ok := s.member(n); !ok || m.State != want {
			return false
		}
	}
	return true
}

// joinAll joins every site to the first one and waits until all see all
// alive.
func joinAll(t *testing.T, sites ...*site) {
	t.Helper()
	names := make([]string, len(sites))
	for i, s := range sites {
		names[i] = s.cfg.NodeName
	}
	for _, s := range sites[1:] {
		if n, err := s.Join([]string{sites[0].LocalAddr()}); err != nil || n != 1 {
			t.Fatalf("%s joins %s: %d, %v", s.cfg.NodeName, sites[0].cfg.NodeName, n, err)
		}
	}
	for _, s := range sites {
		eventually(t, convergeWithin, s.cfg.NodeName+" sees every site alive", func() bool {
			return s.sees(Alive, names...)
		})
	}
}

// waitEvent reads s's events until one satisfies match.
func waitEvent(t *testing.T, s *site, within time.Duration, what string, match func(Event) bool) Event {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				t.Fatalf("events closed while waiting for %s", what)
			}
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("after %v: no event %s", within, what)
		}
	}
}

func TestThreeSitesConverge(t *testing.T) {
	a := startSite(t, "a", nil)
	b := startSite(t, "b", nil)
	c := startSite(t, "c", nil)
	for _, s := range []*site{a, b, c} {
		if addr := s.LocalAddr(); addr == "" || addr == "127.0.0.1:0" {
			t.Fatalf("%s: LocalAddr %q, want the assigned port", s.cfg.NodeName, addr)
		}
	}
	joinAll(t, a, b, c)

	for _, s := range []*site{a, b, c} {
		ms := s.Members()
		names := []string{}
		for _, m := range ms {
			names = append(names, m.Name)
			if m.Local != (m.Name == s.cfg.NodeName) {
				t.Errorf("%s: member %s has Local %v", s.cfg.NodeName, m.Name, m.Local)
			}
		}
		if !slices.Equal(names, []string{"a", "b", "c"}) {
			t.Fatalf("%s: members %v, want [a b c] sorted", s.cfg.NodeName, names)
		}
	}
	// Digests propagate with every field, and gossip addresses match.
	for _, peer := range []*site{a, b, c} {
		m, _ := a.member(peer.cfg.NodeName)
		want := peer.currentDigest()
		want.Version, want.Site = ProtocolVersion, peer.cfg.NodeName
		got := m.Digest
		if m.DigestErr != nil || got.Updated == 0 {
			t.Fatalf("a sees %s's digest %+v, %v", peer.cfg.NodeName, got, m.DigestErr)
		}
		got.Updated = 0
		if got != want {
			t.Errorf("a sees %s's digest %+v, want %+v", peer.cfg.NodeName, got, want)
		}
		if m.Addr != peer.LocalAddr() {
			t.Errorf("a sees %s at %s, it says %s", peer.cfg.NodeName, m.Addr, peer.LocalAddr())
		}
	}
	// The first event is the local site's own join.
	if ev := <-a.Events(); ev.Kind != SiteJoined || !ev.Member.Local {
		t.Errorf("a's first event %v %+v, want its own join", ev.Kind, ev.Member)
	}
}

func TestUpdatePropagates(t *testing.T) {
	a := startSite(t, "a", nil)
	b := startSite(t, "b", nil)
	c := startSite(t, "c", nil)
	joinAll(t, a, b, c)

	b.setDigest(func(d *Digest) { d.FreeNow, d.Overbooking = 2, true })
	if err := b.Update(); err != nil {
		t.Fatalf("Update: %v", err)
	}
	for _, s := range []*site{a, b, c} {
		eventually(t, convergeWithin, s.cfg.NodeName+" sees b's new digest", func() bool {
			m, _ := s.member("b")
			return m.Digest.FreeNow == 2 && m.Digest.Overbooking
		})
	}
	waitEvent(t, a, convergeWithin, "a: b updated", func(ev Event) bool {
		return ev.Kind == SiteUpdated && ev.Member.Name == "b" && ev.Member.Digest.FreeNow == 2
	})
}

func TestUpdateUnchangedDoesNothing(t *testing.T) {
	a := startSite(t, "a", nil)
	before := a.advertised()
	if err := a.Update(); err != nil {
		t.Fatal(err)
	}
	// Only Updated differs: still nothing to broadcast.
	a.setDigest(func(d *Digest) { d.Updated = 42 })
	if err := a.Update(); err != nil {
		t.Fatal(err)
	}
	if after := a.advertised(); &after[0] != &before[0] {
		t.Fatal("Update re-encoded an unchanged digest")
	}
	a.setDigest(func(d *Digest) { d.Free24h-- })
	if err := a.Update(); err != nil {
		t.Fatal(err)
	}
	if after := a.advertised(); &after[0] == &before[0] {
		t.Fatal("Update ignored a changed digest")
	}
	m, _ := a.member("a")
	if m.Digest.Free24h != 63 || m.Digest.Updated != 42 {
		t.Fatalf("local member's digest %+v, want Free24h 63 and Updated 42", m.Digest)
	}
}

// advertised returns the encoded digest NodeMeta hands to memberlist.
func (s *site) advertised() []byte {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	return s.meta
}

func TestLeaveIsSeenAsLeft(t *testing.T) {
	a := startSite(t, "a", nil)
	b := startSite(t, "b", nil)
	c := startSite(t, "c", nil)
	joinAll(t, a, b, c)

	if err := c.Leave(2 * time.Second); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if err := c.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for _, s := range []*site{a, b} {
		eventually(t, convergeWithin, s.cfg.NodeName+" sees c left", func() bool { return s.sees(Left, "c") })
	}
	ev := waitEvent(t, a, convergeWithin, "a: c left", func(ev Event) bool {
		return ev.Kind == SiteLeft && ev.Member.Name == "c"
	})
	if ev.Member.State != Left {
		t.Errorf("leave event state %v, want left", ev.Member.State)
	}
	// A site that left is down without a probe.
	v := Classify(context.Background(), a.Members(), &fakeProber{})
	if len(v.Down) != 1 || v.Down[0].Name != "c" {
		t.Errorf("Down = %v, want [c]", v.Down)
	}
}

func TestDeadPeerIsConfirmedBeforeActing(t *testing.T) {
	a := startSite(t, "a", nil)
	b := startSite(t, "b", nil)
	c := startSite(t, "c", nil)
	joinAll(t, a, b, c)
	cAddr := c.currentDigest().Addr

	// c stops gossiping without leaving: gossip will call it dead.
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	eventually(t, deathWithin, "a sees c dead", func() bool { return a.sees(Dead, "c") })

	// Its gRPC API still answers: the site must not act on c's death.
	answering := &fakeProber{}
	if got := names(a.Reachable(context.Background(), answering)); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("Reachable with c answering = %v, want [b c]", got)
	}
	if n := answering.count(cAddr); n != 1 {
		t.Errorf("c probed %d times, want 1 (b, alive, is not probed)", n)
	}
	// Its gRPC API fails too: now c is confirmed down.
	failing := &fakeProber{fail: map[string]error{cAddr: errors.New("connection refused")}}
	v := Classify(context.Background(), a.Members(), failing)
	if !slices.Equal(names(v.Reachable), []string{"b"}) || !slices.Equal(names(v.Down), []string{"c"}) || len(v.Unconfirmed) != 0 {
		t.Errorf("Classify with c failing = %+v, want reachable [b], down [c]", v)
	}
}

func TestSecretKey(t *testing.T) {
	key := []byte("0123456789abcdef")
	other := []byte("fedcba9876543210")
	a := startSite(t, "a", func(c *Config) { c.SecretKey = key })
	b := startSite(t, "b", func(c *Config) { c.SecretKey = key })
	joinAll(t, a, b)

	wrongKey := startSite(t, "wrong-key", func(c *Config) { c.SecretKey = other })
	noKey := startSite(t, "no-key", nil)
	for _, s := range []*site{wrongKey, noKey} {
		if n, err := s.Join([]string{a.LocalAddr()}); !errors.Is(err, ErrJoin) || n != 0 {
			t.Errorf("%s joins a: %d, %v; want 0, ErrJoin", s.cfg.NodeName, n, err)
		}
	}
	// Give gossip time to do damage, then check that nobody merged.
	time.Sleep(time.Second)
	for _, s := range []*site{a, b} {
		if got := names(s.Members()); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("%s sees %v, want [a b]", s.cfg.NodeName, got)
		}
	}
	for _, s := range []*site{wrongKey, noKey} {
		if got := names(s.Members()); !slices.Equal(got, []string{s.cfg.NodeName}) {
			t.Errorf("%s sees %v, want only itself", s.cfg.NodeName, got)
		}
	}
}

func TestPartition(t *testing.T) {
	transports := map[string]*PartitionTransport{}
	withPartition := func(c *Config) {
		nt, err := NewNetTransport(*c)
		if err != nil {
			t.Fatal(err)
		}
		pt := NewPartitionTransport(nt)
		transports[c.NodeName] = pt
		c.Transport = pt
	}
	a := startSite(t, "a", withPartition)
	b := startSite(t, "b", withPartition)
	c := startSite(t, "c", func(cfg *Config) {
		withPartition(cfg)
		cfg.Seeds = []string{a.LocalAddr()}
	})
	for name, pt := range transports {
		if pt.Addr() == "" {
			t.Fatalf("%s: PartitionTransport.Addr empty after New", name)
		}
	}
	joinAll(t, a, b, c)

	// c runs, so that it rejoins its seed once it is alone.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()

	// Cut c off from a and b; a and b still talk.
	Cut(transports["a"], transports["c"])
	Cut(transports["b"], transports["c"])
	for _, s := range []*site{a, b} {
		eventually(t, deathWithin, s.cfg.NodeName+" sees c dead", func() bool {
			return s.sees(Dead, "c") && s.sees(Alive, "a", "b")
		})
	}
	eventually(t, deathWithin, "c sees a and b dead", func() bool { return c.sees(Dead, "a", "b") })
	if transports["c"].Dropped() == 0 {
		t.Error("c's transport dropped nothing")
	}

	// Mend: c's Run rejoins a, and everyone is alive again.
	Mend(transports["a"], transports["c"])
	Mend(transports["b"], transports["c"])
	for _, s := range []*site{a, b, c} {
		eventually(t, deathWithin, s.cfg.NodeName+" sees everyone alive after mending", func() bool {
			return s.sees(Alive, "a", "b", "c")
		})
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Errorf("Run = %v, want nil after cancel", err)
	}
}

func TestLifecycle(t *testing.T) {
	a := startSite(t, "a", nil)
	if _, err := a.Join(nil); !errors.Is(err, ErrNoSeeds) {
		t.Errorf("Join without seeds = %v, want ErrNoSeeds", err)
	}
	if err := a.Leave(time.Second); err != nil {
		t.Errorf("Leave alone = %v", err)
	}
	if err := a.Leave(time.Second); err != nil {
		t.Errorf("second Leave = %v", err)
	}
	if err := a.Shutdown(); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if err := a.Shutdown(); err != nil {
		t.Errorf("second Shutdown = %v", err)
	}
	if err := a.Leave(time.Second); !errors.Is(err, ErrShutdown) {
		t.Errorf("Leave after Shutdown = %v, want ErrShutdown", err)
	}
	if err := a.Update(); !errors.Is(err, ErrShutdown) {
		t.Errorf("Update after Shutdown = %v, want ErrShutdown", err)
	}
	if _, err := a.Join([]string{"127.0.0.1:1"}); !errors.Is(err, ErrShutdown) {
		t.Errorf("Join after Shutdown = %v, want ErrShutdown", err)
	}
	if err := a.Run(context.Background()); !errors.Is(err, ErrShutdown) {
		t.Errorf("Run after Shutdown = %v, want ErrShutdown", err)
	}
	for range a.Events() { // drains, then ends: the channel is closed
	}
}

func TestJoinUnreachable(t *testing.T) {
	a := startSite(t, "a", nil)
	// Take a port, then free it: nothing listens there.
	b := startSite(t, "b", nil)
	dead := b.LocalAddr()
	_ = b.Shutdown()
	if n, err := a.Join([]string{dead}); !errors.Is(err, ErrJoin) || n != 0 {
		t.Errorf("Join(%s) = %d, %v; want 0, ErrJoin", dead, n, err)
	}
}

func TestEventsNeverBlock(t *testing.T) {
	a := startSite(t, "a", func(c *Config) { c.EventBuffer = 1 })
	b := startSite(t, "b", nil)
	c := startSite(t, "c", nil)
	joinAll(t, a, b, c) // nobody reads a's events
	if a.DroppedEvents() == 0 {
		t.Error("no event dropped with a one-slot buffer and no reader")
	}
}

func TestNewRejects(t *testing.T) {
	ok := func() Digest { return Digest{Addr: "127.0.0.1:9000"} }
	tests := map[string]struct {
		cfg   func(*Config)
		local func() Digest
		want  error
	}{
		"an invalid config":         {func(c *Config) { c.NodeName = "" }, ok, ErrInvalidConfig},
		"no digest function":        {nil, nil, ErrInvalidConfig},
		"an invalid digest":         {nil, func() Digest { return Digest{} }, ErrInvalidDigest},
		"a digest for another site": {nil, func() Digest { return Digest{Site: "other", Addr: "h:1"} }, ErrInvalidDigest},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig("a")
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			m, err := New(cfg, tc.local)
			if !errors.Is(err, tc.want) {
				t.Fatalf("New = %v, want %v", err, tc.want)
			}
			if m != nil {
				_ = m.Shutdown()
			}
		})
	}
}

// fakeProber answers probes from a table: addresses in fail fail with their
// error, others answer. It counts probes per address.
type fakeProber struct {
	fail map[string]error
	mu   sync.Mutex
	n    map[string]int
}

func (p *fakeProber) Probe(ctx context.Context, addr string) error {
	p.mu.Lock()
	if p.n == nil {
		p.n = map[string]int{}
	}
	p.n[addr]++
	p.mu.Unlock()
	return p.fail[addr]
}

func (p *fakeProber) count(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[addr]
}

func names(ms []Member) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}
