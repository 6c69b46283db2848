package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Membership is this site's membership in the federation's gossip: it
// gossips the local digest, keeps a view of the other sites and their
// digests, and reports changes on a channel.
//
// All methods are safe for concurrent use. A Membership is created by New,
// which starts memberlist's listeners, and ends with Shutdown, which stops
// them; call Leave before Shutdown so that peers see the site as Left rather
// than Dead.
type Membership struct {
	cfg   Config
	local func() Digest
	log   *slog.Logger
	ml    *memberlist.Memberlist

	// updateMu serialises Update and Leave's announcement, and guards
	// leaving.
	updateMu sync.Mutex
	leaving  bool // Leave was called: the local digest says Leaving

	// metaMu guards meta and last.
	metaMu sync.Mutex
	meta   []byte // encoded last; never modified in place
	last   Digest // local digest last advertised

	// viewMu guards view, the members as the event callbacks last saw
	// them, by name. memberlist's own Members returns pointers that it
	// rewrites in place, so it cannot be read without a data race; its
	// event callbacks run under its node lock, where copying is safe.
	viewMu sync.Mutex
	view   map[string]Member

	// evMu guards sends on events and its closing.
	evMu     sync.Mutex
	events   chan Event
	evClosed bool
	dropped  atomic.Uint64

	// lifeMu is held for reading by every call into memberlist and for
	// writing by Shutdown, so that nothing calls memberlist after it has
	// been shut down (its Leave panics then).
	lifeMu sync.RWMutex
	closed bool
}

// New validates cfg, computes the first local digest with local, and starts
// memberlist (memberlist.Create) on cfg's addresses. It does not join
// anyone: call Join.
//
// memberlist.Create starts memberlist's own goroutines: the UDP and TCP
// listeners and the timers that probe, gossip and push/pull. They run until
// Shutdown; New starts none of its own. Run, if called, refreshes the digest
// on the caller's goroutine.
//
// local returns the site's current digest. It is called by New, Update and
// Run, never by memberlist's goroutines, so it must be safe to call from
// whichever goroutines call those. New and Update fill in a zero Version
// (ProtocolVersion), an empty Site (cfg.NodeName) and a zero Updated (the
// current time); the digest must then be valid and its Site must equal
// cfg.NodeName.
func New(cfg Config, local func() Digest) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if local == nil {
		return nil, fmt.Errorf("%w: nil local digest function", ErrInvalidConfig)
	}
	if cfg.EventBuffer <= 0 {
		cfg.EventBuffer = 256
	}
	cfg.Seeds = slices.Clone(cfg.Seeds)
	m := &Membership{
		cfg:    cfg,
		local:  local,
		log:    discardLogger(cfg.Logger).With("component", "discovery", "site", cfg.NodeName),
		view:   make(map[string]Member),
		events: make(chan Event, cfg.EventBuffer),
	}
	d, err := m.localDigest()
	if err != nil {
		return nil, err
	}
	if d.Updated == 0 {
		d.Updated = time.Now().Unix()
	}
	meta, err := d.MarshalBinary()
	if err != nil {
		return nil, err
	}
	m.meta, m.last = meta, d

	mc := cfg.memberlistConfig()
	mc.Delegate = (*metaDelegate)(m)
	mc.Events = (*eventDelegate)(m)
	mc.Logger = memberlistLogger(discardLogger(cfg.Logger).With("site", cfg.NodeName))
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("start memberlist for %s: %w", cfg.NodeName, err)
	}
	m.ml = ml
	m.log.Debug("gossip started", "addr", m.LocalAddr())
	return m, nil
}

// localDigest calls local and fills in the defaults New documents.
func (m *Membership) localDigest() (Digest, error) {
	d := m.local()
	d.Leaving = m.leaving
	if d.Version == 0 {
		d.Version = ProtocolVersion
	}
	if d.Site == "" {
		d.Site = m.cfg.NodeName
	}
	if d.Site != m.cfg.NodeName {
		return Digest{}, fmt.Errorf("%w: site %q is not the node name %q", ErrInvalidDigest, d.Site, m.cfg.NodeName)
	}
	if err := d.Validate(); err != nil {
		return Digest{}, fmt.Errorf("local digest: %w", err)
	}
	return d, nil
}

// LocalAddr returns the gossip address (host:port) this site advertises,
// with the port the operating system assigned if Config.BindPort was 0.
// Other sites use it as a seed.
func (m *Membership) LocalAddr() string {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	return m.view[m.cfg.NodeName].Addr
}

// Join contacts the given gossip addresses (host:port), or Config.Seeds if
// seeds is empty, and merges their view of the federation into this site's.
// It returns how many addresses it reached. If it reached none it returns an
// error wrapping ErrJoin; it is then safe to call again later, and Run does
// so for a site that is alone. Without any seed it returns ErrNoSeeds.
//
// Join blocks for up to the profile's TCP timeout per unreachable address.
func (m *Membership) Join(seeds []string) (int, error) {
	if len(seeds) == 0 {
		seeds = m.cfg.Seeds
	}
	if len(seeds) == 0 {
		return 0, ErrNoSeeds
	}
	m.lifeMu.RLock()
	defer m.lifeMu.RUnlock()
	if m.closed {
		return 0, ErrShutdown
	}
	n, err := m.ml.Join(seeds)
	if n == 0 {
		if err == nil {
			return 0, fmt.Errorf("join %v: %w", seeds, ErrJoin)
		}
		return 0, fmt.Errorf("join %v: %w: %w", seeds, ErrJoin, err)
	}
	m.log.Debug("joined", "seeds", seeds, "reached", n)
	return n, nil
}

// Members returns every site this site's gossip knows of, itself included
// (Member.Local), sorted by name. States are gossip's: a Dead member is
// unconfirmed until Confirm's probe fails (see Classify). Members that left
// or died stay in the list until they come back. The slice is new and the
// caller owns it.
func (m *Membership) Members() []Member {
	m.viewMu.Lock()
	out := slices.Collect(maps.Values(m.view))
	m.viewMu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Update calls the local digest function and, if the digest changed,
// re-advertises it to the federation (memberlist's UpdateNode) and waits up
// to Config.UpdateTimeout for the broadcast to be sent. If the digest is
// unchanged, Updated aside, it does nothing and returns nil, so it is cheap
// to call after every change of the site's plan. A timeout is returned as an
// error, but the new digest is in place and will still spread.
//
// Update blocks for about one gossip round when the digest changed, so a
// single-threaded event loop should not call it: let it publish the digest
// where local reads it (an atomic.Pointer, say) and let Run, which calls
// Update every Config.RefreshInterval, do the broadcasting.
func (m *Membership) Update() error {
	m.updateMu.Lock()
	defer m.updateMu.Unlock()
	m.lifeMu.RLock()
	defer m.lifeMu.RUnlock()
	if m.closed {
		return ErrShutdown
	}
	d, err := m.localDigest()
	if err != nil {
		return err
	}
	m.metaMu.Lock()
	last := m.last
	m.metaMu.Unlock()
	same := d
	same.Updated = last.Updated
	if same == last {
		return nil
	}
	if d.Updated == 0 {
		d.Updated = time.Now().Unix()
	}
	return m.advertise(d, m.cfg.UpdateTimeout)
}

// advertise makes d the local digest and broadcasts it, waiting up to
// timeout (forever if <= 0). The caller holds updateMu and lifeMu.
func (m *Membership) advertise(d Digest, timeout time.Duration) error {
	meta, err := d.MarshalBinary()
	if err != nil {
		return err
	}
	m.metaMu.Lock()
	m.meta, m.last = meta, d
	m.metaMu.Unlock()
	if err := m.ml.UpdateNode(timeout); err != nil {
		return fmt.Errorf("update digest of %s: %w", m.cfg.NodeName, err)
	}
	return nil
}

// Events returns the channel of membership changes. It is buffered
// (Config.EventBuffer): memberlist's goroutines never wait for the reader,
// and an event that finds the channel full is dropped and counted in
// DroppedEvents, so a reader that falls behind should resynchronise from
// Members. The channel is closed by Shutdown. There is one channel per
// Membership; concurrent readers share its events.
func (m *Membership) Events() <-chan Event {
	return m.events
}

// DroppedEvents returns how many events were dropped because the Events
// channel was full.
func (m *Membership) DroppedEvents() uint64 {
	return m.dropped.Load()
}

// Leave tells the federation that this site is leaving. It advertises its
// digest with Leaving set, so that peers stop asking it for quotes and will
// know it Left rather than died, and waits up to timeout (forever if <= 0)
// for that broadcast; it then pushes its state to every Alive peer over TCP
// (memberlist's push/pull, as Join does), because gossip alone may deliver
// the leave message first; last it broadcasts memberlist's leave message and
// waits for what is left of timeout. The pushes run at once and Leave waits
// for all of them, so it may take up to the profile's TCP timeout (10 s for
// LAN, 1 s for Local) longer than timeout if a peer that looks alive does not
// answer. A peer that still gets the leave message first sees the site Dead,
// and confirms it down by probing (see Confirm): slower, still correct.
//
// The site keeps gossiping until Shutdown, and Update keeps Leaving set.
// Calling Leave more than once is harmless; after Shutdown it returns
// ErrShutdown.
func (m *Membership) Leave(timeout time.Duration) error {
	m.lifeMu.RLock()
	defer m.lifeMu.RUnlock()
	if m.closed {
		return ErrShutdown
	}
	start := time.Now()
	announced, err := m.announceLeaving(timeout)
	if err != nil {
		m.log.Warn("announce leaving", "err", err)
	}
	if announced {
		m.pushState(m.alivePeers())
	}
	if timeout > 0 {
		timeout = max(timeout-time.Since(start), time.Millisecond)
	}
	if err := m.ml.Leave(timeout); err != nil {
		return fmt.Errorf("leave %s: %w", m.cfg.NodeName, err)
	}
	m.log.Debug("left")
	return nil
}

// alivePeers returns the gossip addresses of the other Alive members.
func (m *Membership) alivePeers() []string {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	var addrs []string
	for _, mem := range m.view {
		if !mem.Local && mem.State == Alive {
			addrs = append(addrs, mem.Addr)
		}
	}
	return addrs
}

// pushState exchanges state with each of addrs over TCP, all at once, and
// returns when every exchange has ended. The caller holds lifeMu.
func (m *Membership) pushState(addrs []string) {
	var wg sync.WaitGroup
	for _, addr := range addrs {
		wg.Go(func() {
			if _, err := m.ml.Join([]string{addr}); err != nil {
				m.log.Debug("push state", "peer", addr, "err", err)
			}
		})
	}
	wg.Wait()
}

// announceLeaving advertises the last local digest with Leaving set, once:
// announced is false if an earlier call did.
func (m *Membership) announceLeaving(timeout time.Duration) (announced bool, err error) {
	m.updateMu.Lock()
	defer m.updateMu.Unlock()
	if m.leaving {
		return false, nil
	}
	m.leaving = true
	m.metaMu.Lock()
	d := m.last
	m.metaMu.Unlock()
	d.Leaving = true
	d.Updated = max(d.Updated, time.Now().Unix())
	return true, m.advertise(d, timeout)
}

// Shutdown stops memberlist's listeners and timers and closes the Events
// channel. Without a Leave first, peers will see this site as Dead once
// their probes fail. It waits for a Leave, Join or Update in progress to
// return. It is safe to call more than once; later calls return nil.
func (m *Membership) Shutdown() error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	err := m.ml.Shutdown()
	m.evMu.Lock()
	m.evClosed = true
	close(m.events)
	m.evMu.Unlock()
	if err != nil {
		return fmt.Errorf("shut down memberlist of %s: %w", m.cfg.NodeName, err)
	}
	m.log.Debug("gossip stopped")
	return nil
}

// Run refreshes the local digest every Config.RefreshInterval (Update) and,
// while this site knows of no other Alive site, rejoins Config.Seeds, so
// that sites started in any order, or cut off for a while, find each other.
// It blocks until ctx is cancelled, then returns nil, or until the
// Membership is shut down, then returns ErrShutdown. The caller owns the
// goroutine. Failures of Update and Join are logged, not returned.
func (m *Membership) Run(ctx context.Context) error {
	if m.cfg.RefreshInterval <= 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(m.cfg.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := m.Update(); err != nil {
			if errors.Is(err, ErrShutdown) {
				return err
			}
			m.log.Warn("refresh digest", "err", err)
		}
		if seeds := m.otherSeeds(); len(seeds) > 0 && m.alone() {
			if _, err := m.Join(seeds); err != nil {
				if errors.Is(err, ErrShutdown) {
					return err
				}
				m.log.Debug("rejoin", "err", err)
			}
		}
	}
}

// alone reports whether no other member is Alive.
func (m *Membership) alone() bool {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	for _, mem := range m.view {
		if !mem.Local && mem.State == Alive {
			return false
		}
	}
	return true
}

// otherSeeds returns Config.Seeds without this site's own address.
func (m *Membership) otherSeeds() []string {
	self := m.LocalAddr()
	return slices.DeleteFunc(slices.Clone(m.cfg.Seeds), func(s string) bool { return s == self })
}

// observe records a member change reported by memberlist and sends it on
// the events channel without blocking. It runs under memberlist's node lock,
// the only place where n may be read.
func (m *Membership) observe(kind EventKind, n *memberlist.Node) {
	mem := memberFromNode(kind, n, m.cfg.NodeName)
	m.viewMu.Lock()
	m.view[mem.Name] = mem
	m.viewMu.Unlock()
	m.log.Debug("member "+kind.String(), "member", mem.Name, "state", mem.State)
	if mem.DigestErr != nil && kind != SiteLeft {
		m.log.Debug("undecodable digest", "member", mem.Name, "err", mem.DigestErr)
	}

	m.evMu.Lock()
	defer m.evMu.Unlock()
	if m.evClosed {
		return
	}
	select {
	case m.events <- Event{Kind: kind, Member: mem}:
	default:
		m.dropped.Add(1)
	}
}

// eventDelegate is the memberlist.EventDelegate of a Membership.
// memberlist calls it from its goroutines, one call at a time, holding its
// node lock.
type eventDelegate Membership

func (d *eventDelegate) NotifyJoin(n *memberlist.Node) { (*Membership)(d).observe(SiteJoined, n) }

func (d *eventDelegate) NotifyLeave(n *memberlist.Node) { (*Membership)(d).observe(SiteLeft, n) }

func (d *eventDelegate) NotifyUpdate(n *memberlist.Node) { (*Membership)(d).observe(SiteUpdated, n) }

// metaDelegate is the memberlist.Delegate of a Membership. Only NodeMeta
// does anything: fedsched sends no user messages through gossip.
type metaDelegate Membership

// NodeMeta returns the encoded local digest.
func (d *metaDelegate) NodeMeta(limit int) []byte {
	m := (*Membership)(d)
	m.metaMu.Lock()
	meta := m.meta
	m.metaMu.Unlock()
	if len(meta) > limit {
		// Cannot happen: MaxDigestSize is about half of memberlist's limit.
		m.log.Error("digest exceeds memberlist's metadata limit", "size", len(meta), "limit", limit)
		return nil
	}
	return slices.Clone(meta)
}

func (d *metaDelegate) NotifyMsg([]byte)                           {}
func (d *metaDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *metaDelegate) LocalState(join bool) []byte                { return nil }
func (d *metaDelegate) MergeRemoteState(buf []byte, join bool)     {}

var (
	_ memberlist.EventDelegate = (*eventDelegate)(nil)
	_ memberlist.Delegate      = (*metaDelegate)(nil)
)
