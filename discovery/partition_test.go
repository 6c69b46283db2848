package discovery

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// recordingTransport is a memberlist.NodeAwareTransport that records what
// it is asked to send.
type recordingTransport struct {
	mu        sync.Mutex
	writes    []string
	dials     []string
	shutdowns int
}

func (r *recordingTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return net.ParseIP("127.0.0.1"), 7946, nil
}
func (r *recordingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return r.WriteToAddress(b, memberlist.Address{Addr: addr})
}
func (r *recordingTransport) WriteToAddress(_ []byte, a memberlist.Address) (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, a.Addr)
	return time.Now(), nil
}
func (r *recordingTransport) PacketCh() <-chan *memberlist.Packet { return nil }
func (r *recordingTransport) DialTimeout(addr string, d time.Duration) (net.Conn, error) {
	return r.DialAddressTimeout(memberlist.Address{Addr: addr}, d)
}
func (r *recordingTransport) DialAddressTimeout(a memberlist.Address, _ time.Duration) (net.Conn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dials = append(r.dials, a.Addr)
	return nil, errors.New("recorded")
}
func (r *recordingTransport) StreamCh() <-chan net.Conn { return nil }
func (r *recordingTransport) Shutdown() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shutdowns++
	return nil
}

func TestPartitionTransport(t *testing.T) {
	inner := &recordingTransport{}
	pt := NewPartitionTransport(inner)
	if _, _, err := pt.FinalAdvertiseAddr("", 0); err != nil || pt.Addr() != "127.0.0.1:7946" {
		t.Fatalf("Addr = %q, %v", pt.Addr(), err)
	}

	pt.Block("127.0.0.1:1", "[::ffff:127.0.0.1]:2")
	if !pt.Blocked("[::ffff:127.0.0.1]:1") || !pt.Blocked("127.0.0.1:2") || pt.Blocked("127.0.0.1:3") {
		t.Fatal("addresses are not compared after parsing")
	}
	for _, addr := range []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"} {
		if _, err := pt.WriteTo(nil, addr); err != nil {
			t.Errorf("WriteTo(%s) = %v: a dropped packet reports success", addr, err)
		}
		_, err := pt.DialTimeout(addr, time.Second)
		if blocked := errors.Is(err, ErrPartitioned); blocked != pt.Blocked(addr) {
			t.Errorf("DialTimeout(%s) = %v", addr, err)
		}
	}
	if len(inner.writes) != 1 || inner.writes[0] != "127.0.0.1:3" || len(inner.dials) != 1 {
		t.Errorf("passed through writes %v dials %v, want only 127.0.0.1:3", inner.writes, inner.dials)
	}
	if pt.Dropped() != 4 {
		t.Errorf("Dropped = %d, want 4", pt.Dropped())
	}

	pt.Unblock("127.0.0.1:1")
	if pt.Blocked("127.0.0.1:1") || !pt.Blocked("127.0.0.1:2") {
		t.Error("Unblock")
	}
	pt.Heal()
	if pt.Blocked("127.0.0.1:2") {
		t.Error("Heal left an address blocked")
	}

	_ = pt.Shutdown()
	_ = pt.Shutdown()
	if inner.shutdowns != 1 {
		t.Errorf("inner shut down %d times, want 1", inner.shutdowns)
	}
}

func TestMemberFromNodeUnknownVersion(t *testing.T) {
	meta, _ := testDigest("future").MarshalBinary()
	meta[0] = 2 // a digest from a newer fedsched
	n := &memberlist.Node{Name: "future", Addr: net.ParseIP("10.0.0.9"), Port: 7946, Meta: meta}
	m := memberFromNode(SiteJoined, n, "me")
	if !errors.Is(m.DigestErr, ErrUnknownVersion) || m.Digest != (Digest{}) {
		t.Fatalf("member %+v: want ErrUnknownVersion and a zero digest", m)
	}
	if m.Addr != "10.0.0.9:7946" || m.State != Alive || m.Local {
		t.Fatalf("member %+v", m)
	}
	if m := memberFromNode(SiteLeft, n, "me"); m.State != Dead {
		t.Fatalf("a member gone without a leaving digest is %v, want dead", m.State)
	}
}
