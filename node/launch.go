package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/discovery"
	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
)

// LaunchOptions are the parts of a site's wiring that callers other than
// `fedsched node` (tests, the e2e harness, the demo) need to choose. The
// zero value is what `fedsched node` uses.
type LaunchOptions struct {
	// Logger; nil discards.
	Logger *slog.Logger
	// Listener serves the gRPC API; nil listens on cfg.Listen.
	Listener net.Listener
	// Ready, if not nil, receives the site's API address once it serves
	// (after recovery).
	Ready chan<- string
	// Supervisor is the command the process executor runs each job's
	// supervisor with; nil means this binary with "supervise".
	Supervisor []string
	// GossipTransport wraps memberlist's transport (the e2e harness cuts
	// links with it); nil uses memberlist's own.
	GossipTransport func(discovery.Config) (memberlist.Transport, error)
	// GossipRefresh, if > 0, is how often the site re-advertises its digest
	// (discovery.Config.RefreshInterval; tests).
	GossipRefresh time.Duration
	// Dial opens connections to peers; nil dials plaintext gRPC.
	Dial Dialer
	// GossipAddr, if not nil, receives the bound gossip address.
	GossipAddr chan<- string
	// Federation overrides delegation settings (its Peers and Dial are
	// set by Launch).
	Federation FederationConfig
	// Clock overrides the node's clock (tests); nil means real time, scaled
	// by cfg.TimeScale.
	Clock clock.Clock
	// StoreOpened, if not nil, receives the site's store once open; the
	// e2e harness closes it under the running site to crash it without
	// letting in-flight commits finish.
	StoreOpened func(io.Closer)
	// HTTPAddr, if not nil, receives the bound address of the HTTP
	// listener (cfg.HTTP.Listen) once it listens.
	HTTPAddr chan<- string
	// HTTPAuthorize, if not nil, wraps every handler of the HTTP listener
	// inside the site's own authorization (docs/security.md), which it can
	// only narrow: it sees the caller's identity (auth.FromContext) and may
	// refuse more, never let in whom the site refuses.
	HTTPAuthorize func(http.Handler) http.Handler
}

// Launch runs one site until ctx ends: it opens the store, builds the
// executor, the node, gossip membership (when cfg.Gossip.Addr is set) and
// the gRPC server, and runs them all under one errgroup. On return every
// goroutine it started has stopped, the site has left the federation and
// the store is closed.
func Launch(ctx context.Context, cfg config.Config, opt LaunchOptions) error {
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sec, err := prepareSecurity(cfg)
	if err != nil {
		return err
	}
	if cfg.HTTP.Listen != "" {
		if _, _, err := httpSecurity(cfg, sec); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w: %w", ErrInvalidRequest, err)
	}
	// Local users reach the socket (and their jobs' working directories)
	// through the data directory; they may not list or read it.
	if err := os.Chmod(cfg.DataDir, 0o711); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	st, err := openStore(cfg, log)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	if opt.StoreOpened != nil {
		opt.StoreOpened(st)
	}
	epoch, err := checkStore(ctx, st, cfg.DataDir)
	if err != nil {
		return err
	}
	clk := opt.Clock
	if clk == nil {
		if clk, err = siteClock(ctx, st, cfg.TimeScale, log); err != nil {
			return err
		}
	}
	var ex executor.Executor
	switch cfg.Executor {
	case config.ExecutorSimulated:
		ex = executor.NewSimulated(executor.SimulatedConfig{Clock: clk, Logger: log})
	case config.ExecutorSlurm:
		if ex, cfg.Procs, err = newSlurmExecutor(ctx, cfg, epoch, log); err != nil {
			return err
		}
	default:
		sup := opt.Supervisor
		if sup == nil {
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("locate own binary for job supervisors: %w", err)
			}
			sup = []string{self, "supervise"}
		}
		p, err := executor.NewProcess(executor.ProcessConfig{DataDir: cfg.DataDir, Epoch: epoch, SupervisorCommand: sup, KillGrace: cfg.KillGrace, Logger: log,
			Accounts: executor.Accounts{AllowRoot: cfg.Jobs.AllowRoot, ServiceAccount: cfg.Jobs.ServiceAccount}})
		if err != nil {
			return err
		}
		ex = p
	}
	lis := opt.Listener
	switch {
	case !sec.tcp() && lis != nil:
		lis.Close()
		return fmt.Errorf("no plaintext TCP without --insecure: give the node a certificate (tls.*) or serve only its Unix socket: %w", ErrInvalidRequest)
	case !sec.tcp():
		log.Info("no TCP listener: no certificates and no --insecure; local users reach the node on its Unix socket", "socket", cfg.SocketPath())
	case lis == nil:
		if lis, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("listen on %s: %w: %w", cfg.Listen, ErrUnavailable, err)
		}
	}
	sock, err := listenSocket(cfg.SocketPath(), cfg.Socket != "", log)
	if err != nil {
		if lis != nil {
			lis.Close()
		}
		return err
	}
	closeAll := func() {
		for _, l := range []net.Listener{lis, sock} {
			if l != nil {
				l.Close()
			}
		}
	}
	if cfg.Gossip.Advertise == "" && lis != nil {
		cfg.Gossip.Advertise = lis.Addr().String()
	}
	fed := opt.Federation
	d := cfg.Delegation
	fed.MaxCandidates = cmp.Or(fed.MaxCandidates, d.MaxCandidates)
	fed.QuoteTimeout = cmp.Or(fed.QuoteTimeout, d.QuoteTimeout)
	fed.HoldSeconds = cmp.Or(fed.HoldSeconds, int64(d.HoldSeconds))
	fed.MaxHops = cmp.Or(fed.MaxHops, d.MaxHops)
	fed.CommunityShare = cmp.Or(fed.CommunityShare, d.CommunityShare)
	if fed.Pricing == nil {
		p := d.Pricing
		if fed.Pricing, err = delegation.ParsePricing(p.Model, delegation.LibraPlus{PBase: p.PBase, Alpha: p.Alpha, Beta: p.Beta}); err != nil {
			lis.Close()
			return fmt.Errorf("delegation.pricing: %w", err)
		}
	}
	if fed.Transfer == delegation.OnReject && d.Transfer != "" {
		if fed.Transfer, err = delegation.ParseTransfer(d.Transfer); err != nil {
			lis.Close()
			return fmt.Errorf("delegation.transfer: %w", err)
		}
	}
	if fed.Prefer == nil {
		fed.Prefer = d.Prefer
	}
	fed.DiscloseQueue = fed.DiscloseQueue || d.DiscloseQueue
	fed.PullInterval = cmp.Or(fed.PullInterval, d.PullInterval)
	var members *discovery.Membership
	peers := &lazyPeers{}
	if cfg.Gossip.Addr != "" {
		if lis == nil {
			closeAll()
			return fmt.Errorf("a federating node needs a TCP listener: %w", ErrInvalidRequest)
		}
		fed.Peers = peers
		fed.Dial = opt.Dial
		if fed.Dial == nil {
			fed.Dial = sec.defaultDialer()
		}
	}
	n, err := New(cfg, Deps{Store: st, Executor: ex, Clock: clk, Logger: log, Version: Version, Federation: fed})
	if err != nil {
		closeAll()
		return err
	}
	if cfg.Gossip.Addr != "" {
		known, err := knownMembers(ctx, st)
		if err != nil {
			closeAll()
			return err
		}
		cfg.Gossip.Join = seeds(cfg.Gossip.Join, known)
		if members, err = startMembership(cfg, sec, n, opt, log); err != nil {
			closeAll()
			return err
		}
		peers.m.Store(members)
		if opt.GossipAddr != nil {
			opt.GossipAddr <- members.LocalAddr()
		}
	}
	if sec.insecure {
		log.Warn("INSECURE: plaintext gRPC and unencrypted gossip; every caller is trusted as it claims and may act as operator (development only)",
			"listen", cfg.Listen, "gossip", cfg.Gossip.Addr)
	}
	warnJobAccounts(cfg, log, os.Getuid())
	listen := ""
	if lis != nil {
		listen = lis.Addr().String()
	}
	log.Info("node starting", "site", cfg.Site, "listen", listen, "socket", cfg.SocketPath(), "tls", sec.tls != nil, "data", cfg.DataDir, "procs", cfg.Procs,
		"executor", cfg.Executor, "policy", cfg.Policy, "time_scale", cfg.TimeScale, "gossip", cfg.Gossip.Addr)
	g, gctx := errgroup.WithContext(ctx)
	if cfg.HTTP.Listen != "" {
		if err := startHTTP(gctx, g, cfg, sec, n, opt, log); err != nil {
			closeAll()
			if members != nil {
				members.Shutdown() //nolint:errcheck // failing start
			}
			return err
		}
	}
	g.Go(func() error { return ex.Run(gctx) })
	g.Go(func() error { return n.Run(gctx) })
	if lis != nil {
		g.Go(func() error { return n.Serve(gctx, lis, 5*time.Second, grpc.Creds(sec.serverCreds())) })
	}
	if sock != nil {
		g.Go(func() error { return n.Serve(gctx, sock, 5*time.Second, grpc.Creds(auth.UnixCredentials{})) })
	}
	if members != nil {
		g.Go(func() error {
			if _, err := members.Join(nil); err != nil && len(cfg.Gossip.Join) > 0 {
				log.Warn("joining the federation failed; retrying in the background", "seeds", cfg.Gossip.Join, "err", err)
			}
			err := members.Run(gctx)
			members.Leave(2 * time.Second) //nolint:errcheck // leaving is best effort; peers notice the silence
			members.Shutdown()             //nolint:errcheck // idempotent
			return err
		})
	}
	if opt.Ready != nil {
		switch {
		case lis != nil:
			g.Go(func() error {
				return awaitServing(gctx, lis.Addr().String(), listen, sec.peerCreds(cfg.Site), opt.Ready)
			})
		case sock != nil:
			g.Go(func() error {
				return awaitServing(gctx, "unix://"+cfg.SocketPath(), cfg.SocketPath(), auth.UnixCredentials{}, opt.Ready)
			})
		}
	}
	err = g.Wait()
	log.Info("node stopped", "site", cfg.Site)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// startHTTP listens on cfg.HTTP.Listen and serves the metrics and the
// status page under g, with the API's TLS settings.
func startHTTP(ctx context.Context, g *errgroup.Group, cfg config.Config, sec *security, n *Node, opt LaunchOptions, log *slog.Logger) error {
	tc, authorize, err := httpSecurity(cfg, sec)
	if err != nil {
		return err
	}
	if extra, site := opt.HTTPAuthorize, authorize; extra != nil && site != nil {
		authorize = func(h http.Handler) http.Handler { return site(extra(h)) }
	} else if extra != nil {
		authorize = extra
	}
	hl, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("http listen on %s: %w: %w", cfg.HTTP.Listen, ErrUnavailable, err)
	}
	scheme := "http"
	if tc != nil {
		scheme = "https"
	}
	log.Info("serving metrics and the status page", "url", scheme+"://"+hl.Addr().String()+"/")
	if opt.HTTPAddr != nil {
		opt.HTTPAddr <- hl.Addr().String()
	}
	g.Go(func() error { return ServeHTTP(ctx, hl, n.HTTPHandler(authorize), tc) })
	return nil
}

// Version is the software version nodes report.
const Version = "0.1.0-dev"

// lazyPeers lets the node be built before the membership that gossips its
// digest: it answers no members until the membership is set.
type lazyPeers struct {
	m atomicMembership
}

func (p *lazyPeers) Members() []discovery.Member {
	if m := p.m.Load(); m != nil {
		return m.Members()
	}
	return nil
}

func startMembership(cfg config.Config, sec *security, n *Node, opt LaunchOptions, log *slog.Logger) (*discovery.Membership, error) {
	host, port, err := gossipBind(cfg.Gossip.Addr)
	if err != nil {
		return nil, err
	}
	dc := discovery.DefaultConfig()
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		dc = discovery.DefaultLocalConfig(cfg.Site)
	}
	dc.NodeName, dc.BindAddr, dc.Seeds, dc.Logger = cfg.Site, host, cfg.Gossip.Join, log
	dc.SecretKey, dc.OtherKeys = sec.gossipKey, sec.gossipKeys
	if dc.BindPort, err = strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("gossip port %q: %w: %w", port, ErrInvalidRequest, err)
	}
	if opt.GossipRefresh > 0 {
		dc.RefreshInterval = opt.GossipRefresh
	}
	if opt.GossipTransport != nil {
		if dc.Transport, err = opt.GossipTransport(dc); err != nil {
			return nil, err
		}
	}
	return discovery.New(dc, n.Digest)
}

// awaitServing reports addr on ready once the site's health service at
// target says SERVING.
func awaitServing(ctx context.Context, target, addr string, creds credentials.TransportCredentials, ready chan<- string) error {
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	for {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			select {
			case ready <- addr:
			case <-ctx.Done():
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
}

type atomicMembership = atomic.Pointer[discovery.Membership]

// siteClock is the clock of a site whose clock nobody supplied: the wall
// clock, scaled by timeScale, resumed from the reading of the site's
// clock the store kept when that is ahead of the wall clock. A scaled
// clock runs ahead of the wall clock; restarted from the wall clock's
// time, the site would go back in time: jobs submitted later would carry
// earlier times than jobs before the restart, and times already promised
// would come again. The site's time runs on at its old pace while the
// node is down, as a site's time does.
func siteClock(ctx context.Context, st store.MetaStore, timeScale float64, log *slog.Logger) (clock.Clock, error) {
	now := time.Now()
	origin := now
	switch v, err := st.GetMeta(ctx, store.SiteClockKey); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("read the site's clock: %w", err)
	default:
		kept, err := store.ParseSiteClock(v)
		if err != nil {
			return nil, fmt.Errorf("the store's reading of the site's clock: %w", err)
		}
		if at := kept.At(now); at.After(now) {
			origin = at
			log.Info("resuming the site's time from the store: it is ahead of the wall clock (a scaled clock ran here)",
				"site_time", at.UTC().Format(time.RFC3339), "ahead", at.Sub(now).Round(time.Second).String())
		}
	}
	if timeScale == 1 && origin.Equal(now) {
		return clock.Real(), nil
	}
	return clock.Scaled(origin, timeScale), nil
}

// openStore opens the store of the data directory as cfg.Store says: with
// its write-ahead log, or the bbolt file alone.
func openStore(cfg config.Config, log *slog.Logger) (store.FileStore, error) {
	if sc := cfg.Store; sc.Log {
		return store.OpenWAL(cfg.DataDir, &store.Options{Logger: log, CheckpointRecords: sc.CheckpointRecords,
			CheckpointBytes: int64(sc.CheckpointBytes), CheckpointInterval: sc.CheckpointInterval})
	}
	// The event loop groups its own commits; the store need not wait for
	// more writers.
	return store.OpenBolt(cfg.DataDir, &store.Options{Logger: log, MaxBatchDelay: -1})
}
