// Package e2e runs whole fedsched federations inside one process, on
// loopback: every site is a real node.Launch with its own bbolt file, a
// real gRPC listener on an OS-assigned port and real memberlist gossip. All
// sites share one scaled clock, so that deadlines mean the same everywhere,
// and run their jobs on the simulated executor.
//
// A Cluster can crash a site (isolate it from the network at once, then
// stop it without any goodbye), stop it gracefully, restart it on the same
// data directory and addresses, and cut the gossip or the gRPC links
// between chosen sites. A Hook sees every FederationService call a site
// makes to a peer, before and after it, so that a test can crash a site at
// an exact step of the delegation protocol.
//
// Tests and `fedsched demo` use it; it talks to the sites only through
// their public gRPC API.
package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/protobuf/proto"

	"github.com/fedsched/fedsched/discovery"
	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/pki"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// SiteConfig describes one site of a cluster.
type SiteConfig struct {
	// Name is the site id (required, unique).
	Name string
	// Procs is the number of processors (default 8).
	Procs int
	// Policy is the queue policy (default conservative: only a planning
	// site admits SLA jobs and delegates what it cannot take).
	Policy string
	// Overbooking configures overbooking; Enabled false turns it off.
	// Empty mode, risk test and PoF threshold take the defaults.
	Overbooking config.Overbooking
	// Delegation is the site's own delegation block (its config file's);
	// Options.Federation's non-zero fields take precedence over it.
	Delegation config.Delegation
}

// Options configure a cluster.
type Options struct {
	// Dir holds one data directory per site (required). The caller owns
	// it and removes it.
	Dir string
	// Sites are started in order; each joins the gossip of those before.
	Sites []SiteConfig
	// TimeScale is how many times faster than the wall clock the shared
	// clock runs (default 100).
	TimeScale float64
	// GossipRefresh, if > 0, is how often each site re-advertises its
	// digest (default: a second).
	GossipRefresh time.Duration
	// Federation is every site's delegation configuration (Peers and Dial
	// are set by the harness). Zero fields take node's defaults, except
	// ReportInterval, which defaults to 200 ms here.
	Federation node.FederationConfig
	// Logger receives the sites' logs, each line with a "site" attribute;
	// nil discards them.
	Logger *slog.Logger
	// StartTimeout bounds the start of one site and the convergence of
	// gossip (default 30 s).
	StartTimeout time.Duration
	// Insecure runs the sites with --insecure (plaintext gRPC and gossip).
	// By default the cluster makes a throwaway CA in Dir/pki, a site
	// certificate per site, an operator certificate for its clients and a
	// gossip key: mutual TLS and encrypted gossip, as in production.
	Insecure bool
	// HTTP makes each site serve its metrics and status page on a loopback
	// port (Site.HTTPAddr).
	HTTP bool
}

// Link names the kinds of traffic between two sites that Cut and Mend act
// on.
type Link int

const (
	// Gossip is memberlist traffic (UDP and TCP).
	Gossip Link = 1 << iota
	// RPC is FederationService traffic between the sites' nodes.
	RPC
	// Both is Gossip | RPC: a network partition.
	Both = Gossip | RPC
)

// Phase says whether a Hook runs before a call is sent or after its reply
// (or error) came back.
type Phase int

const (
	// Before: the call has not left the calling site.
	Before Phase = iota
	// After: the called site answered (Err is its answer) and the caller
	// has not seen the answer yet.
	After
)

func (p Phase) String() string {
	if p == Before {
		return "before"
	}
	return "after"
}

// Call is one FederationService call between sites, as a Hook sees it.
type Call struct {
	// From is the calling site, To the called one ("" if its address is
	// not a site of the cluster).
	From, To string
	// Method is the RPC's name: Quote, Agree, Release, GetAgreement,
	// Terminate, ReportOutcome, ListMembers.
	Method string
	Phase  Phase
	Req    proto.Message
	// Reply and Err are the answer (After only).
	Reply proto.Message
	Err   error
}

// Hook sees every call a site makes to a peer. It may block (ctx is the
// call's: it ends when the calling site stops) and may replace the call's
// result: a non-nil error returned Before fails the call without sending
// it; returned After, it replaces the answer the caller sees.
type Hook func(ctx context.Context, c Call) error

// Cluster is a running federation.
type Cluster struct {
	opts  Options
	clk   *clock.ScaledClock
	log   *slog.Logger
	sites []*Site
	net   *network
	hook  atomic.Pointer[Hook]
}

// Site is one site of a cluster. Its Client and Fed stay usable across
// restarts (they reconnect).
type Site struct {
	Name string
	// Client is a user's connection to the site's SiteService.
	Client fedschedv1.SiteServiceClient
	// Fed is a connection to the site's FederationService (ListMembers).
	Fed fedschedv1.FederationServiceClient

	c    *Cluster
	cfg  config.Config
	conn *grpc.ClientConn

	// Fixed at the first start and kept across restarts.
	apiAddr, gossipAddr, httpAddr string

	mu        sync.Mutex
	running   bool
	cancel    context.CancelFunc
	done      chan struct{} // closed when the current Launch returned
	err       error         // its result
	lis       *crashListener
	transport *discovery.PartitionTransport
	store     io.Closer // the current Launch's store
}

// Start starts the sites of opts one after the other, each joining the
// gossip of those started before, and waits until every site sees every
// other alive. On error, the sites already started are stopped.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("e2e: Options.Dir is required")
	}
	if len(opts.Sites) == 0 {
		return nil, errors.New("e2e: no sites")
	}
	if opts.TimeScale == 0 {
		opts.TimeScale = 100
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if opts.Federation.ReportInterval <= 0 {
		opts.Federation.ReportInterval = 200 * time.Millisecond
	}
	c := &Cluster{opts: opts, clk: clock.Scaled(time.Now(), opts.TimeScale), log: opts.Logger, net: newNetwork()}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if !opts.Insecure {
		if err := c.makePKI(); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, sc := range opts.Sites {
		if seen[sc.Name] {
			return nil, fmt.Errorf("e2e: site %q twice", sc.Name)
		}
		seen[sc.Name] = true
		s, err := c.newSite(sc)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.sites = append(c.sites, s)
		if err := c.launch(ctx, s); err != nil {
			c.Close()
			return nil, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := c.WaitConverged(wctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) newSite(sc SiteConfig) (*Site, error) {
	cfg := config.Default()
	cfg.Site = sc.Name
	cfg.DataDir = filepath.Join(c.opts.Dir, sc.Name)
	cfg.Listen = "127.0.0.1:0"
	cfg.Procs = sc.Procs
	if cfg.Procs == 0 {
		cfg.Procs = 8
	}
	cfg.Executor = config.ExecutorSimulated
	cfg.TimeScale = c.opts.TimeScale
	if sc.Policy != "" {
		cfg.Policy = sc.Policy
	}
	ob := sc.Overbooking
	if ob.Mode == "" {
		ob.Mode = cfg.Overbooking.Mode
	}
	if ob.RiskTest == "" {
		ob.RiskTest = cfg.Overbooking.RiskTest
	}
	if ob.PoFMax == 0 {
		ob.PoFMax = cfg.Overbooking.PoFMax
	}
	cfg.Overbooking = ob
	cfg.Delegation = sc.Delegation
	cfg.Gossip.Addr = "127.0.0.1:0"
	if c.opts.Insecure {
		cfg.Insecure = true
	} else {
		if err := pki.CreateCert(c.PKIDir(), auth.Site, sc.Name, pki.Options{}); err != nil {
			return nil, fmt.Errorf("e2e: site %s: %w", sc.Name, err)
		}
		f := c.Files(auth.Site, sc.Name)
		cfg.TLS = config.TLS{CA: f.CA, Cert: f.Cert, Key: f.Key}
		cfg.Gossip.Key = c.GossipKeyFile()
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("e2e: site %s: %w", sc.Name, err)
	}
	return &Site{Name: sc.Name, c: c, cfg: cfg}, nil
}

// Clock is the clock every site runs on.
func (c *Cluster) Clock() *clock.ScaledClock { return c.clk }

// Sites lists the sites in start order.
func (c *Cluster) Sites() []*Site { return slices.Clone(c.sites) }

// Site returns the site called name, or nil.
func (c *Cluster) Site(name string) *Site {
	for _, s := range c.sites {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (c *Cluster) mustSite(name string) (*Site, error) {
	if s := c.Site(name); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("e2e: no site %q", name)
}

// SetHook installs h (nil removes the hook).
func (c *Cluster) SetHook(h Hook) {
	if h == nil {
		c.hook.Store(nil)
		return
	}
	c.hook.Store(&h)
}

// Config returns the site's configuration (its gossip address and seeds
// are those of its last start).
func (s *Site) Config() config.Config { return s.cfg }

// Addr is the site's gRPC address.
func (s *Site) Addr() string { return s.apiAddr }

// GossipAddr is the site's gossip address.
func (s *Site) GossipAddr() string { return s.gossipAddr }

// Running reports whether the site is up.
func (s *Site) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// launch starts one Launch of s and waits until it serves.
func (c *Cluster) launch(ctx context.Context, s *Site) error {
	first := s.apiAddr == ""
	var lis net.Listener
	var err error
	if first {
		lis, err = net.Listen("tcp", "127.0.0.1:0")
	} else {
		lis, err = listenAgain(ctx, s.apiAddr)
	}
	if err != nil {
		return fmt.Errorf("e2e: site %s: listen: %w", s.Name, err)
	}
	if first {
		s.apiAddr = lis.Addr().String()
		c.net.setAddr(s.apiAddr, s.Name)
	}
	cl := newCrashListener(lis)
	cfg := s.cfg
	cfg.Listen = s.apiAddr
	cfg.Gossip.Join = nil
	for _, o := range c.sites {
		if o != s && o.gossipAddr != "" {
			cfg.Gossip.Join = append(cfg.Gossip.Join, o.gossipAddr)
		}
	}
	if !first {
		cfg.Gossip.Addr = s.gossipAddr
	}
	httpAddr := make(chan string, 1)
	if c.opts.HTTP {
		cfg.HTTP.Listen = cmp.Or(s.httpAddr, "127.0.0.1:0")
	}
	s.cfg = cfg
	fed := c.opts.Federation
	ready, gaddr := make(chan string, 1), make(chan string, 1)
	lctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	opt := node.LaunchOptions{
		StoreOpened: func(st io.Closer) {
			s.mu.Lock()
			s.store = st
			s.mu.Unlock()
		},
		Logger:        c.log.With("site", s.Name),
		Listener:      cl,
		Ready:         ready,
		GossipAddr:    gaddr,
		HTTPAddr:      httpAddr,
		Clock:         c.clk,
		GossipRefresh: c.opts.GossipRefresh,
		Federation:    fed,
		Dial:          c.dialer(s.Name),
		GossipTransport: func(dc discovery.Config) (memberlist.Transport, error) {
			inner, err := discovery.NewNetTransport(dc)
			if err != nil {
				return nil, err
			}
			pt := discovery.NewPartitionTransport(inner)
			s.mu.Lock()
			s.transport = pt
			s.mu.Unlock()
			// Links cut before this start stay cut from its first packet.
			c.applyGossip()
			return pt, nil
		},
	}
	s.mu.Lock()
	s.running, s.cancel, s.done, s.lis, s.err = true, cancel, done, cl, nil
	s.mu.Unlock()
	go func() {
		err := node.Launch(lctx, cfg, opt)
		s.mu.Lock()
		s.err = err
		s.running = false
		s.mu.Unlock()
		close(done)
	}()
	tctx, tcancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer tcancel()
	for got := false; !got; {
		select {
		case a := <-gaddr:
			if s.gossipAddr == "" {
				s.gossipAddr = a
				c.applyGossip()
			}
		case a := <-httpAddr:
			s.httpAddr = a
		case <-ready:
			got = true
		case <-done:
			return fmt.Errorf("e2e: site %s stopped while starting: %v", s.Name, s.launchErr())
		case <-tctx.Done():
			cancel()
			<-done
			return fmt.Errorf("e2e: site %s did not start: %w", s.Name, tctx.Err())
		}
	}
	select {
	case a := <-httpAddr: // sent before the site serves
		s.httpAddr = a
	default:
	}
	if s.conn == nil {
		conn, err := c.userConn(s.apiAddr)
		if err != nil {
			cancel()
			<-done
			return err
		}
		s.conn, s.Client, s.Fed = conn, fedschedv1.NewSiteServiceClient(conn), fedschedv1.NewFederationServiceClient(conn)
	}
	return nil
}

// APIAddr is the address of the site's gRPC API.
func (s *Site) APIAddr() string { return s.apiAddr }

// HTTPAddr is the address of the site's metrics and status page ("" unless
// Options.HTTP).
func (s *Site) HTTPAddr() string { return s.httpAddr }

func (s *Site) launchErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// listenAgain listens on addr, retrying while the port is still taken
// (the previous instance's listener is closing).
func listenAgain(ctx context.Context, addr string) (net.Listener, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		lis, err := net.Listen("tcp", addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return lis, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// fastBackoff reconnects within a fraction of a second after a link comes
// back, instead of gRPC's default of up to two minutes.
var fastBackoff = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
	MinConnectTimeout: 2 * time.Second,
})

// userConn is the cluster's own connection to a site (as an operator):
// not subject to cuts.
func (c *Cluster) userConn(addr string) (*grpc.ClientConn, error) {
	creds, err := c.ClientCredentials(auth.Operator, "e2e")
	if err != nil {
		return nil, err
	}
	return grpc.NewClient(addr, grpc.WithTransportCredentials(creds), fastBackoff)
}

// dialer is the node.Dialer of site from: connections to peers go through
// the cluster's network (refused while the link is cut) and calls through
// the hook.
func (c *Cluster) dialer(from string) node.Dialer {
	var files *auth.TLSFiles
	if !c.opts.Insecure {
		f := c.Files(auth.Site, from)
		files = &f
	}
	return func(_ context.Context, site, addr string) (*grpc.ClientConn, error) {
		to := c.net.siteOf(addr)
		creds, err := node.PeerCredentials(files, site)
		if err != nil {
			return nil, err
		}
		return grpc.NewClient(addr, grpc.WithTransportCredentials(creds), fastBackoff,
			grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
				if c.net.rpcBlocked(from, to) {
					return nil, fmt.Errorf("e2e: link %s -> %s is cut", from, to)
				}
				var d net.Dialer
				conn, err := d.DialContext(ctx, "tcp", a)
				if err != nil {
					return nil, err
				}
				return c.net.track(from, to, conn), nil
			}),
			grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				hp := c.hook.Load()
				if hp == nil {
					return invoke(ctx, method, req, reply, cc, opts...)
				}
				call := Call{From: from, To: to, Method: path.Base(method), Phase: Before}
				call.Req, _ = req.(proto.Message)
				if err := (*hp)(ctx, call); err != nil {
					return err
				}
				err := invoke(ctx, method, req, reply, cc, opts...)
				call.Phase, call.Err = After, err
				call.Reply, _ = reply.(proto.Message)
				if herr := (*hp)(ctx, call); herr != nil {
					return herr
				}
				return err
			}))
	}
}

// ---------------------------------------------------------------------
// Faults.

// Crash stops site name as a crash would: at once it is cut off from every
// peer (gossip dropped both ways, gRPC connections to and from it closed
// and refused), its listener drops every connection, and its Launch is
// cancelled. Nothing it does afterwards reaches anyone: peers get no
// goodbye (gossip finds it dead) and no answer. Its simulated executor's
// jobs die with it (a restart reports them lost). Crash returns without
// waiting for the site's goroutines to end; Restart and Close wait.
func (c *Cluster) Crash(name string) error {
	s, err := c.mustSite(name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return fmt.Errorf("e2e: site %s is not running", name)
	}
	cancel, lis := s.cancel, s.lis
	s.running = false
	s.mu.Unlock()
	c.net.setDown(name, true)
	c.applyGossip()
	lis.kill()
	cancel()
	return nil
}

// HardCrash crashes site name like Crash, but first closes its store under
// it: a commit in flight fails instead of finishing, and nothing the site
// does after this instant reaches its data directory (as if its process
// were killed; its jobs die with it, as with Crash).
func (c *Cluster) HardCrash(name string) error {
	s, err := c.mustSite(name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	st, running := s.store, s.running
	s.mu.Unlock()
	if !running || st == nil {
		return fmt.Errorf("e2e: site %s is not running", name)
	}
	if err := st.Close(); err != nil {
		return fmt.Errorf("e2e: site %s: close store: %w", name, err)
	}
	return c.Crash(name)
}

// Stop stops site name gracefully (it leaves the gossip) and waits until
// it has stopped.
func (c *Cluster) Stop(name string) error {
	s, err := c.mustSite(name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	running, cancel, done := s.running, s.cancel, s.done
	s.mu.Unlock()
	if !running {
		return fmt.Errorf("e2e: site %s is not running", name)
	}
	cancel()
	<-done
	if err := s.launchErr(); err != nil {
		return fmt.Errorf("e2e: site %s: %w", name, err)
	}
	return nil
}

// Wait waits until the last Launch of site name has returned (after a
// Crash or Stop) and returns its error.
func (c *Cluster) Wait(ctx context.Context, name string) error {
	s, err := c.mustSite(name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return s.launchErr()
	case <-ctx.Done():
		return fmt.Errorf("e2e: site %s still stopping: %w", name, ctx.Err())
	}
}

// Restart starts a stopped or crashed site again on the same data
// directory and the same gRPC and gossip addresses, joining the others,
// and waits until it serves (not until gossip has converged: see
// WaitConverged).
func (c *Cluster) Restart(ctx context.Context, name string) error {
	s, err := c.mustSite(name)
	if err != nil {
		return err
	}
	if s.Running() {
		return fmt.Errorf("e2e: site %s is running", name)
	}
	// A crashed instance's error is expected; only its end matters.
	_ = c.Wait(ctx, name)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	c.net.setDown(name, false)
	c.applyGossip()
	return c.launch(ctx, s)
}

// Cut cuts the links of the given kinds between sites a and b, in both
// directions, until Mend.
func (c *Cluster) Cut(a, b string, what Link) error {
	if _, err := c.mustSite(a); err != nil {
		return err
	}
	if _, err := c.mustSite(b); err != nil {
		return err
	}
	c.net.setCut(a, b, what, true)
	c.applyGossip()
	return nil
}

// Mend restores the links of the given kinds between a and b.
func (c *Cluster) Mend(a, b string, what Link) error {
	if _, err := c.mustSite(a); err != nil {
		return err
	}
	if _, err := c.mustSite(b); err != nil {
		return err
	}
	c.net.setCut(a, b, what, false)
	c.applyGossip()
	return nil
}

// Isolate cuts the links of the given kinds between site name and every
// other site.
func (c *Cluster) Isolate(name string, what Link) error {
	for _, o := range c.sites {
		if o.Name != name {
			if err := c.Cut(name, o.Name, what); err != nil {
				return err
			}
		}
	}
	return nil
}

// Heal mends every link.
func (c *Cluster) Heal() {
	c.net.healAll()
	c.applyGossip()
}

// applyGossip makes every running site's gossip transport drop exactly the
// traffic to the sites it is cut off from.
func (c *Cluster) applyGossip() {
	for _, s := range c.sites {
		s.mu.Lock()
		pt := s.transport
		s.mu.Unlock()
		if pt == nil {
			continue
		}
		for _, o := range c.sites {
			if o == s || o.gossipAddr == "" {
				continue
			}
			if c.net.gossipBlocked(s.Name, o.Name) {
				pt.Block(o.gossipAddr)
			} else {
				pt.Unblock(o.gossipAddr)
			}
		}
	}
}

// Close stops every running site (gracefully, in parallel), waits for the
// crashed ones to finish stopping, and closes the user connections. It
// returns the first error of a site that was not crashed.
func (c *Cluster) Close() error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.sites))
	for i, s := range c.sites {
		wg.Go(func() {
			s.mu.Lock()
			cancel, done := s.cancel, s.done
			s.mu.Unlock()
			if cancel == nil {
				return
			}
			crashed := c.net.isDown(s.Name)
			cancel()
			select {
			case <-done:
			case <-time.After(time.Minute):
				errs[i] = fmt.Errorf("e2e: site %s did not stop within a minute", s.Name)
				return
			}
			if err := s.launchErr(); err != nil && !crashed {
				errs[i] = fmt.Errorf("e2e: site %s: %w", s.Name, err)
			}
		})
	}
	wg.Wait()
	for _, s := range c.sites {
		if s.conn != nil {
			s.conn.Close()
		}
	}
	return errors.Join(errs...)
}

// ---------------------------------------------------------------------
// Membership.

// Members returns the federation as site name sees it: member name to
// gossip state ("alive", "dead", "left").
func (c *Cluster) Members(ctx context.Context, name string) (map[string]string, error) {
	s, err := c.mustSite(name)
	if err != nil {
		return nil, err
	}
	r, err := s.Fed.ListMembers(ctx, &fedschedv1.ListMembersRequest{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range r.GetMembers() {
		out[m.GetSite()] = m.GetState()
	}
	return out, nil
}

// WaitMember waits until site observer sees member in gossip state state.
func (c *Cluster) WaitMember(ctx context.Context, observer, member, state string) error {
	var last map[string]string
	for {
		m, err := c.Members(ctx, observer)
		if err == nil && m[member] == state {
			return nil
		}
		if err == nil {
			last = m
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("e2e: %s sees %s as %q, want %q: %w", observer, member, last[member], state, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitConverged waits until every running site sees every other running
// site alive, with the site's current gRPC address.
func (c *Cluster) WaitConverged(ctx context.Context) error {
	var lastErr error
	for {
		lastErr = c.converged(ctx)
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("e2e: gossip did not converge: %v: %w", lastErr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) converged(ctx context.Context) error {
	var up []*Site
	for _, s := range c.sites {
		if s.Running() {
			up = append(up, s)
		}
	}
	for _, s := range up {
		r, err := s.Fed.ListMembers(ctx, &fedschedv1.ListMembersRequest{})
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		seen := map[string]*fedschedv1.Member{}
		for _, m := range r.GetMembers() {
			seen[m.GetSite()] = m
		}
		for _, o := range up {
			m := seen[o.Name]
			switch {
			case m == nil:
				return fmt.Errorf("%s does not know %s yet", s.Name, o.Name)
			case m.GetState() != "alive":
				return fmt.Errorf("%s sees %s %s", s.Name, o.Name, m.GetState())
			case m.GetAddr() != o.apiAddr:
				return fmt.Errorf("%s has no digest of %s yet", s.Name, o.Name)
			}
		}
	}
	return nil
}

// ---------------------------------------------------------------------
// The network between the sites.

type pair struct{ a, b string }

func unordered(a, b string) pair {
	if a > b {
		a, b = b, a
	}
	return pair{a, b}
}

// network is the state of the links between sites: cuts, crashed sites,
// and the gRPC connections between sites, so that a cut closes them.
type network struct {
	mu        sync.Mutex
	cutGossip map[pair]bool
	cutRPC    map[pair]bool
	down      map[string]bool
	byAddr    map[string]string
	conns     map[pair]map[*trackedConn]struct{} // ordered: dialer, dialed
}

func newNetwork() *network {
	return &network{cutGossip: map[pair]bool{}, cutRPC: map[pair]bool{}, down: map[string]bool{}, byAddr: map[string]string{},
		conns: map[pair]map[*trackedConn]struct{}{}}
}

func (n *network) setAddr(addr, site string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.byAddr[addr] = site
}

func (n *network) siteOf(addr string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byAddr[addr]
}

func (n *network) isDown(site string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.down[site]
}

func (n *network) gossipBlocked(a, b string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.down[a] || n.down[b] || n.cutGossip[unordered(a, b)]
}

func (n *network) rpcBlocked(a, b string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rpcBlockedLocked(a, b)
}

func (n *network) rpcBlockedLocked(a, b string) bool {
	if b == "" {
		return n.down[a]
	}
	return n.down[a] || n.down[b] || n.cutRPC[unordered(a, b)]
}

func (n *network) setDown(site string, down bool) {
	n.mu.Lock()
	n.down[site] = down
	n.mu.Unlock()
	n.closeBlocked()
}

func (n *network) setCut(a, b string, what Link, cut bool) {
	n.mu.Lock()
	if what&Gossip != 0 {
		n.cutGossip[unordered(a, b)] = cut
	}
	if what&RPC != 0 {
		n.cutRPC[unordered(a, b)] = cut
	}
	n.mu.Unlock()
	n.closeBlocked()
}

func (n *network) healAll() {
	n.mu.Lock()
	clear(n.cutGossip)
	clear(n.cutRPC)
	n.mu.Unlock()
}

// closeBlocked closes every tracked connection whose link is now cut.
func (n *network) closeBlocked() {
	n.mu.Lock()
	var doomed []*trackedConn
	for p, set := range n.conns {
		if !n.rpcBlockedLocked(p.a, p.b) {
			continue
		}
		for tc := range set {
			doomed = append(doomed, tc)
		}
	}
	n.mu.Unlock()
	for _, tc := range doomed {
		tc.Close()
	}
}

// track registers a connection from site from to site to; it is closed
// at once if the link is already cut.
func (n *network) track(from, to string, c net.Conn) net.Conn {
	tc := &trackedConn{Conn: c, n: n, key: pair{from, to}}
	n.mu.Lock()
	blocked := n.rpcBlockedLocked(from, to)
	if !blocked {
		if n.conns[tc.key] == nil {
			n.conns[tc.key] = map[*trackedConn]struct{}{}
		}
		n.conns[tc.key][tc] = struct{}{}
	}
	n.mu.Unlock()
	if blocked {
		c.Close()
	}
	return tc
}

type trackedConn struct {
	net.Conn
	n    *network
	key  pair
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.n.mu.Lock()
		delete(c.n.conns[c.key], c)
		c.n.mu.Unlock()
	})
	return c.Conn.Close()
}

// crashListener is a site's gRPC listener that can drop every connection
// at once and refuse new ones, as a dead process would.
type crashListener struct {
	net.Listener
	mu    sync.Mutex
	dead  bool
	conns map[net.Conn]struct{}
}

func newCrashListener(l net.Listener) *crashListener {
	return &crashListener{Listener: l, conns: map[net.Conn]struct{}{}}
}

func (l *crashListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.dead {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.conns[c] = struct{}{}
		l.mu.Unlock()
		return &listenedConn{Conn: c, l: l}, nil
	}
}

// kill closes every accepted connection and refuses the next ones; the
// listener itself stays open until the server closes it.
func (l *crashListener) kill() {
	l.mu.Lock()
	l.dead = true
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	clear(l.conns)
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

type listenedConn struct {
	net.Conn
	l *crashListener
}

func (c *listenedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c.Conn)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// DebugLogger returns a text logger on stderr if the environment variable
// E2E_LOG is set (to a level: debug, info, warn), else nil.
func DebugLogger() *slog.Logger {
	v := os.Getenv("E2E_LOG")
	if v == "" {
		return nil
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(v)); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}
