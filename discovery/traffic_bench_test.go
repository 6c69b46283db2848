package discovery

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// BenchmarkGossipTraffic measures the gossip traffic of one pool: n sites
// in this process on 127.0.0.1 with memberlist's own UDP/TCP transport
// (wrapped to count the bytes each site sends), every site changing its
// digest at every refresh, as a busy node would. It runs for a fixed
// window after the pool has converged (b.N is ignored: use -benchtime 1x)
// and reports the bytes one site sends per second, by packets (probes and
// gossip, UDP) and by streams (push/pull, TCP).
//
// profile=lan is what a node uses on a real network (DefaultConfig: probes
// every 1 s, gossip every 200 ms to 3 peers, push/pull every 30 s);
// profile=local is what it uses on loopback (DefaultLocalConfig: push/pull
// every 2 s).
func BenchmarkGossipTraffic(b *testing.B) {
	for _, n := range []int{10, 50} {
		for _, prof := range []string{"lan", "local"} {
			b.Run(fmt.Sprintf("sites=%d/profile=%s", n, prof), func(b *testing.B) { benchGossip(b, n, prof) })
		}
	}
}

func benchGossip(b *testing.B, n int, prof string) {
	window := 20 * time.Second
	if prof == "lan" {
		window = 65 * time.Second // two push/pull intervals of every site
	}
	var udp, tcp atomic.Int64
	sites := make([]*Membership, n)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(stop)
		wg.Wait()
		for _, m := range sites {
			if m != nil {
				m.Shutdown() //nolint:errcheck // the benchmark is over
			}
		}
	}()
	for i := range sites {
		name := fmt.Sprintf("site%02d", i)
		cfg := DefaultLocalConfig(name)
		if prof == "lan" {
			cfg.Profile, cfg.PushPullInterval, cfg.RefreshInterval = ProfileLAN, 0, DefaultConfig().RefreshInterval
		}
		inner, err := NewNetTransport(cfg)
		if err != nil {
			b.Fatal(err)
		}
		ct := newCountingTransport(inner, &udp, &tcp)
		cfg.Transport = ct
		var mu sync.Mutex
		free := int32(0)
		d := Digest{Addr: fmt.Sprintf("127.0.0.1:%d", 10000+i), Procs: 1024, Policy: "conservative"}
		local := func() Digest {
			mu.Lock()
			defer mu.Unlock()
			d.FreeNow, d.Free1h, d.Free4h, d.Free24h = free, free, free, 1024
			return d
		}
		m, err := New(cfg, local)
		if err != nil {
			ct.Shutdown() //nolint:errcheck // New failed: ours to close
			b.Fatal(err)
		}
		sites[i] = m
		if i > 0 {
			if _, err := m.Join([]string{sites[0].LocalAddr()}); err != nil {
				b.Fatal(err)
			}
		}
		// A busy site: its digest changes at every refresh.
		wg.Go(func() {
			t := time.NewTicker(cfg.RefreshInterval)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				mu.Lock()
				free = (free + 64) % 1024
				mu.Unlock()
				m.Update() //nolint:errcheck // a timeout still spreads
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range sites {
		for len(m.Members()) < n {
			if time.Now().After(deadline) {
				b.Fatalf("pool of %d did not converge: %s sees %d", n, m.cfg.NodeName, len(m.Members()))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	b.ResetTimer()
	u0, t0 := udp.Load(), tcp.Load()
	time.Sleep(window)
	b.StopTimer()
	sec := window.Seconds() * float64(n)
	b.ReportMetric(float64(udp.Load()-u0)/sec, "udp-B/s/site")
	b.ReportMetric(float64(tcp.Load()-t0)/sec, "tcp-B/s/site")
	b.ReportMetric(float64(udp.Load()-u0+tcp.Load()-t0)/sec, "B/s/site")
}

// countingTransport counts the bytes a memberlist transport sends: packets
// and what is written on streams it dials or accepts.
type countingTransport struct {
	memberlist.NodeAwareTransport
	udp, tcp *atomic.Int64
	streams  chan net.Conn
	done     chan struct{}
	once     sync.Once
}

func newCountingTransport(inner memberlist.NodeAwareTransport, udp, tcp *atomic.Int64) *countingTransport {
	c := &countingTransport{NodeAwareTransport: inner, udp: udp, tcp: tcp, streams: make(chan net.Conn), done: make(chan struct{})}
	go func() {
		for {
			select {
			case <-c.done:
				return
			case conn := <-inner.StreamCh():
				select {
				case c.streams <- &countingConn{Conn: conn, n: tcp}:
				case <-c.done:
					conn.Close()
					return
				}
			}
		}
	}()
	return c
}

func (c *countingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	c.udp.Add(int64(len(b)))
	return c.NodeAwareTransport.WriteTo(b, addr)
}

func (c *countingTransport) WriteToAddress(b []byte, addr memberlist.Address) (time.Time, error) {
	c.udp.Add(int64(len(b)))
	return c.NodeAwareTransport.WriteToAddress(b, addr)
}

func (c *countingTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := c.NodeAwareTransport.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, n: c.tcp}, nil
}

func (c *countingTransport) DialAddressTimeout(addr memberlist.Address, timeout time.Duration) (net.Conn, error) {
	conn, err := c.NodeAwareTransport.DialAddressTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, n: c.tcp}, nil
}

func (c *countingTransport) StreamCh() <-chan net.Conn { return c.streams }

func (c *countingTransport) Shutdown() error {
	c.once.Do(func() { close(c.done) })
	return c.NodeAwareTransport.Shutdown()
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	k, err := c.Conn.Write(b)
	c.n.Add(int64(k))
	return k, err
}
