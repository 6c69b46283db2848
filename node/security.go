package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/pki"
)

// security is what a site's start-up decided about transport security:
// TLS material (nil without certificates), gossip keys, whether plaintext
// TCP is served (--insecure).
type security struct {
	tls        *auth.Material
	gossipKey  []byte
	gossipKeys [][]byte // accepted besides gossipKey, during a rotation
	insecure   bool
}

// prepareSecurity checks the security settings of cfg and loads its files.
// Closed by default: a node that gossips needs a CA, a site certificate
// of its own name and a gossip key, unless cfg.Insecure (loopback only).
func prepareSecurity(cfg config.Config) (*security, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf(format+": %w", append(args, ErrInvalidRequest)...)
	}
	s := &security{insecure: cfg.Insecure}
	if cfg.TLS.Cert != "" {
		m, err := auth.TLSFiles{CA: cfg.TLS.CA, Cert: cfg.TLS.Cert, Key: cfg.TLS.Key}.Load()
		if err != nil {
			return nil, bad("%v", err)
		}
		if m.Self.Kind != auth.Site || m.Self.Name != cfg.Site {
			return nil, bad("tls.cert %s is the certificate of %v; site %s needs its own site certificate (`fedsched tls cert create --site %s`)",
				cfg.TLS.Cert, m.Self, cfg.Site, cfg.Site)
		}
		s.tls = m
	}
	if cfg.Insecure {
		if s.tls != nil {
			return nil, bad("--insecure contradicts tls.cert: with certificates the node is secure; drop one")
		}
		for _, a := range []struct{ what, addr string }{{"listen", cfg.Listen}, {"gossip", cfg.Gossip.Addr}} {
			if a.addr != "" && !config.Loopback(a.addr) {
				return nil, bad("--insecure serves plaintext to anyone who can connect, so only on loopback addresses (127.0.0.1, ::1, localhost); %s is %q", a.what, a.addr)
			}
		}
	}
	if cfg.Gossip.Addr != "" && !cfg.Insecure {
		if s.tls == nil {
			return nil, bad("a federating node (--gossip) needs --tls-ca, --tls-cert and --tls-key (make them with `fedsched tls`), or --insecure on loopback for development")
		}
		if cfg.Gossip.Key == "" {
			return nil, bad("a federating node (--gossip) needs --gossip-key FILE (make one with `fedsched tls gossip-key --out FILE`), or --insecure on loopback for development")
		}
	}
	if cfg.Gossip.Key != "" {
		k, others, err := pki.ReadGossipKeys(cfg.Gossip.Key)
		if err != nil {
			return nil, bad("%v", err)
		}
		s.gossipKey, s.gossipKeys = k, others
	}
	return s, nil
}

// tcp reports whether the node serves its API on TCP at all.
func (s *security) tcp() bool { return s.tls != nil || s.insecure }

func (s *security) serverCreds() credentials.TransportCredentials {
	if s.tls == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(s.tls.ServerConfig())
}

// peerCreds are the credentials of a connection to site: under TLS the
// server must present site's own certificate.
func (s *security) peerCreds(site string) credentials.TransportCredentials {
	if s.tls == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(s.tls.ClientConfig(site))
}

// PeerCredentials returns the credentials a site with these TLS files
// uses to dial the peer site named site (nil files: plaintext, for
// --insecure). The e2e harness uses it in its own Dialer.
func PeerCredentials(files *auth.TLSFiles, site string) (credentials.TransportCredentials, error) {
	if files == nil {
		return insecure.NewCredentials(), nil
	}
	m, err := files.Load()
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(m.ClientConfig(site)), nil
}

// defaultDialer dials peers with creds and a reconnect backoff of at most
// 5 s, so that held-back outcomes flow soon after a partition heals
// (gRPC's default backoff grows to two minutes).
func (s *security) defaultDialer() Dialer {
	return func(_ context.Context, site, addr string) (*grpc.ClientConn, error) {
		bo := backoff.DefaultConfig
		bo.MaxDelay = 5 * time.Second
		return grpc.NewClient(addr, grpc.WithTransportCredentials(s.peerCreds(site)),
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 2 * time.Second}))
	}
}

// listenSocket listens on the node's Unix socket: a stale socket of an
// earlier run is replaced (the data directory's lock says no other node
// uses it), and every local user may connect (the kernel tells the node
// who they are). explicit says the path was configured: a default path
// too long for a socket is skipped with a warning instead.
func listenSocket(path string, explicit bool, log *slog.Logger) (net.Listener, error) {
	const maxLen = 104 // sun_path is 108 bytes on Linux, 104 on BSDs
	if len(path) >= maxLen {
		if explicit {
			return nil, fmt.Errorf("socket path %s is %d bytes, longer than a Unix socket path may be (%d): %w", path, len(path), maxLen-1, ErrInvalidRequest)
		}
		log.Warn("no local socket: the data directory's path is too long for one; set --socket to a shorter path", "path", path)
		return nil, nil
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("socket path %s exists and is not a socket: %w", path, ErrInvalidRequest)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on socket %s: %w: %w", path, ErrUnavailable, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		lis.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return lis, nil
}

// warnJobAccounts says at start whose account jobs will run under, for a
// node running as uid, with a warning when that is the node's own.
func warnJobAccounts(cfg config.Config, log *slog.Logger, uid int) {
	if cfg.Executor == config.ExecutorSimulated {
		return
	}
	if uid == 0 {
		log.Info("jobs run as their users' accounts (the node runs as root)", "allow_root", cfg.Jobs.AllowRoot, "service_account", cfg.Jobs.ServiceAccount)
		return
	}
	name := strconv.Itoa(uid)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	log.Warn("jobs run as the node's own user: every job can read and signal the others and the node's files; run the node as root to run each job as its user", "user", name)
}

var errNoTCP = errors.New("no TCP listener")
