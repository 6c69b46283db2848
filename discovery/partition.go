package discovery

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// NewNetTransport starts memberlist's own UDP and TCP transport on
// cfg.BindAddr:cfg.BindPort (an OS-assigned port if 0), logging to
// cfg.Logger. It is what memberlist would build itself when Config.Transport
// is nil; build it yourself to wrap it, in a PartitionTransport for example.
// Its listeners run until its Shutdown, which Membership.Shutdown calls once
// it is the Config.Transport of a Membership.
func NewNetTransport(cfg Config) (*memberlist.NetTransport, error) {
	if net.ParseIP(cfg.BindAddr) == nil {
		return nil, fmt.Errorf("%w: bind address %q is not an IP address", ErrInvalidConfig, cfg.BindAddr)
	}
	t, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{cfg.BindAddr},
		BindPort:  cfg.BindPort,
		Logger:    memberlistLogger(discardLogger(cfg.Logger)),
	})
	if err != nil {
		return nil, fmt.Errorf("start gossip transport on %s: %w", net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.BindPort)), err)
	}
	return t, nil
}

// PartitionTransport wraps a memberlist transport and drops the traffic to
// a set of blocked gossip addresses, changed at runtime, to simulate network
// partitions between sites in tests and e2e. It is safe for concurrent use.
//
// Blocking is enforced where traffic is sent: a packet to a blocked address
// is dropped (the write reports success, as a lossy network would) and a
// dial to one fails with ErrPartitioned. Incoming traffic is not filtered:
// an incoming stream's remote address is an ephemeral port that does not
// name the sending site. To cut the link between two sites in both
// directions, each must wrap its transport and block the other; Cut does
// that.
//
// Addresses are gossip addresses, host:port, compared after parsing, so
// "127.0.0.1:7946" and "[::ffff:127.0.0.1]:7946" are the same address.
type PartitionTransport struct {
	inner memberlist.NodeAwareTransport

	mu      sync.RWMutex
	blocked map[string]struct{}
	self    string

	dropped  atomic.Uint64
	shutdown sync.Once
	err      error
}

var _ memberlist.NodeAwareTransport = (*PartitionTransport)(nil)

// NewPartitionTransport wraps inner, blocking nothing. The result owns
// inner: its Shutdown shuts inner down.
func NewPartitionTransport(inner memberlist.NodeAwareTransport) *PartitionTransport {
	return &PartitionTransport{inner: inner, blocked: make(map[string]struct{})}
}

// canonAddr returns addr in one spelling per address, or addr itself if it
// is not an IP host:port.
func canonAddr(addr string) string {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return addr
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
}

// Block drops traffic to addrs from now on.
func (t *PartitionTransport) Block(addrs ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range addrs {
		t.blocked[canonAddr(a)] = struct{}{}
	}
}

// Unblock lets traffic to addrs through again.
func (t *PartitionTransport) Unblock(addrs ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range addrs {
		delete(t.blocked, canonAddr(a))
	}
}

// Heal unblocks every address.
func (t *PartitionTransport) Heal() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.blocked)
}

// Blocked reports whether traffic to addr is dropped.
func (t *PartitionTransport) Blocked(addr string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, ok := t.blocked[canonAddr(addr)]
	return ok
}

// Addr returns the gossip address memberlist advertises through this
// transport, known once the Membership using it has been created, or "".
func (t *PartitionTransport) Addr() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.self
}

// Dropped returns how many packets and dials were dropped so far.
func (t *PartitionTransport) Dropped() uint64 {
	return t.dropped.Load()
}

// Cut blocks traffic between a and b in both directions: a blocks b's
// address and b blocks a's. Both must be in use by a Membership already.
func Cut(a, b *PartitionTransport) {
	a.Block(b.Addr())
	b.Block(a.Addr())
}

// Mend undoes Cut(a, b).
func Mend(a, b *PartitionTransport) {
	a.Unblock(b.Addr())
	b.Unblock(a.Addr())
}

// FinalAdvertiseAddr implements memberlist.Transport; it also records the
// result as Addr.
func (t *PartitionTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	addr, p, err := t.inner.FinalAdvertiseAddr(ip, port)
	if err != nil {
		return addr, p, err
	}
	self := canonAddr(net.JoinHostPort(addr.String(), strconv.Itoa(p)))
	t.mu.Lock()
	t.self = self
	t.mu.Unlock()
	return addr, p, nil
}

// WriteTo implements memberlist.Transport.
func (t *PartitionTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress implements memberlist.NodeAwareTransport: it drops the
// packet if a.Addr is blocked.
func (t *PartitionTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.Blocked(a.Addr) {
		t.dropped.Add(1)
		return time.Now(), nil
	}
	return t.inner.WriteToAddress(b, a)
}

// PacketCh implements memberlist.Transport.
func (t *PartitionTransport) PacketCh() <-chan *memberlist.Packet { return t.inner.PacketCh() }

// DialTimeout implements memberlist.Transport.
func (t *PartitionTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport: it fails with
// ErrPartitioned if a.Addr is blocked.
func (t *PartitionTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.Blocked(a.Addr) {
		t.dropped.Add(1)
		return nil, fmt.Errorf("dial %s: %w", a.Addr, ErrPartitioned)
	}
	return t.inner.DialAddressTimeout(a, timeout)
}

// StreamCh implements memberlist.Transport.
func (t *PartitionTransport) StreamCh() <-chan net.Conn { return t.inner.StreamCh() }

// Shutdown implements memberlist.Transport: it shuts the wrapped transport
// down, once; later calls return the first call's result.
func (t *PartitionTransport) Shutdown() error {
	t.shutdown.Do(func() { t.err = t.inner.Shutdown() })
	return t.err
}
