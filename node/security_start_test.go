package node

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/pki"
)

// TestStartRefusesInsecureSetups: closed by default. A federating node
// needs certificates and a gossip key unless --insecure, --insecure is for
// loopback addresses only and contradicts certificates, and a node serves
// with its own site certificate only; each refusal names what to do.
func TestStartRefusesInsecureSetups(t *testing.T) {
	dir := t.TempDir()
	if err := pki.CreateCA(dir, "test CA", pki.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []struct {
		k    auth.Kind
		name string
	}{{auth.Site, "a"}, {auth.Site, "b"}, {auth.User, "a"}} {
		if err := pki.CreateCert(dir, id.k, id.name, pki.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(dir, "gossip.key")
	if err := pki.WriteGossipKey(key, false); err != nil {
		t.Fatal(err)
	}
	certs := func(k auth.Kind, name string) func(*config.Config) {
		return func(c *config.Config) {
			c.TLS.CA = filepath.Join(dir, pki.CAFile)
			c.TLS.Cert, c.TLS.Key = pki.CertFiles(dir, k, name)
		}
	}
	for _, tc := range []struct {
		name string
		set  []func(*config.Config)
		want string // "" for a start that passes
	}{
		{"socket only", nil, ""},
		{"gossip without certificates", []func(*config.Config){func(c *config.Config) { c.Gossip.Addr = "127.0.0.1:0" }}, "needs --tls-ca"},
		{"gossip without a key", []func(*config.Config){certs(auth.Site, "a"), func(c *config.Config) { c.Gossip.Addr = "127.0.0.1:0" }}, "needs --gossip-key"},
		{"gossip with certificates and key", []func(*config.Config){certs(auth.Site, "a"), func(c *config.Config) { c.Gossip.Addr, c.Gossip.Key = "127.0.0.1:0", key }}, ""},
		{"insecure gossip on loopback", []func(*config.Config){func(c *config.Config) { c.Insecure, c.Gossip.Addr, c.Listen = true, "127.0.0.1:0", "localhost:7070" }}, ""},
		{"insecure on a public listen address", []func(*config.Config){func(c *config.Config) { c.Insecure, c.Listen = true, "0.0.0.0:7070" }}, "only on loopback"},
		{"insecure on a public gossip address", []func(*config.Config){func(c *config.Config) { c.Insecure, c.Listen, c.Gossip.Addr = true, "127.0.0.1:7070", ":7946" }}, "only on loopback"},
		{"insecure with certificates", []func(*config.Config){certs(auth.Site, "a"), func(c *config.Config) { c.Insecure = true }}, "contradicts"},
		{"another site's certificate", []func(*config.Config){certs(auth.Site, "b")}, "needs its own site certificate"},
		{"a user's certificate", []func(*config.Config){certs(auth.User, "a")}, "needs its own site certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Site, cfg.Listen = "a", ""
			for _, f := range tc.set {
				f(&cfg)
			}
			_, err := prepareSecurity(cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v; want a refusal saying %q", err, tc.want)
			}
		})
	}
}

// TestStartSaysWhoseAccountJobsRunAs: a node that runs processes says at
// start whose account its jobs run as, with a warning when it is the
// node's own (it is not root); the simulated executor runs nothing and
// says nothing.
func TestStartSaysWhoseAccountJobsRunAs(t *testing.T) {
	for _, tc := range []struct {
		executor string
		uid      int
		want     string // "" for nothing said
	}{
		{config.ExecutorProcess, 0, `level=INFO msg="jobs run as their users' accounts`},
		{config.ExecutorProcess, 65534, `level=WARN msg="jobs run as the node's own user`},
		{config.ExecutorSimulated, 65534, ""},
	} {
		var b strings.Builder
		cfg := config.Default()
		cfg.Executor = tc.executor
		warnJobAccounts(cfg, slog.New(slog.NewTextHandler(&b, nil)), tc.uid)
		if got := b.String(); tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s executor, node uid %d: %q; want %q", tc.executor, tc.uid, got, tc.want)
		}
	}
}
