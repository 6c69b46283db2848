package pki

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fedsched/fedsched/node/auth"
)

func TestCertificatesNameTheirIdentity(t *testing.T) {
	dir := t.TempDir()
	if err := CreateCA(dir, "test", Options{}); err != nil {
		t.Fatal(err)
	}
	caCert, _, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	for _, tc := range []struct {
		k     auth.Kind
		name  string
		usage x509.ExtKeyUsage
		life  time.Duration
	}{
		{auth.Site, "site-a", x509.ExtKeyUsageServerAuth, SiteLifetime},
		{auth.User, "alice", x509.ExtKeyUsageClientAuth, PersonLifetime},
		{auth.Operator, "ops", x509.ExtKeyUsageClientAuth, PersonLifetime},
	} {
		if err := CreateCert(dir, tc.k, tc.name, Options{}); err != nil {
			t.Fatal(err)
		}
		certPath, keyPath := CertFiles(dir, tc.k, tc.name)
		if filepath.Base(certPath) != tc.k.String()+"-"+tc.name+".pem" || filepath.Base(keyPath) != tc.k.String()+"-"+tc.name+"-key.pem" {
			t.Errorf("files %s, %s", certPath, keyPath)
		}
		if st, err := os.Stat(keyPath); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, err %v; want 0600", keyPath, st.Mode().Perm(), err)
		}
		c := readCert(t, certPath)
		id, err := auth.VerifyChain(pool, []*x509.Certificate{c}, tc.usage)
		if err != nil {
			t.Fatalf("%v %s: %v", tc.k, tc.name, err)
		}
		if id.Kind != tc.k || id.Name != tc.name {
			t.Errorf("identity %v, want %v %s", id, tc.k, tc.name)
		}
		if got := c.NotAfter.Sub(c.NotBefore); got < tc.life || got > tc.life+time.Hour {
			t.Errorf("%v %s lives %v, want about %v", tc.k, tc.name, got, tc.life)
		}
		// A user's certificate cannot serve: it is no site.
		if tc.k != auth.Site {
			if _, err := auth.VerifyChain(pool, []*x509.Certificate{c}, x509.ExtKeyUsageServerAuth); err == nil {
				t.Errorf("%v certificate verifies for serving", tc.k)
			}
		}
	}
	if err := CreateCert(dir, auth.User, "alice", Options{}); !errors.Is(err, ErrExists) {
		t.Errorf("overwriting a certificate: %v, want ErrExists", err)
	}
	if err := CreateCert(dir, auth.User, "alice", Options{Force: true}); err != nil {
		t.Errorf("--force: %v", err)
	}
	if err := CreateCert(dir, auth.User, "../etc/passwd", Options{}); err == nil {
		t.Error("a name that is a path was accepted")
	}
	// A certificate never outlives its CA.
	if err := CreateCert(dir, auth.Site, "long", Options{Lifetime: 2 * CALifetime}); err != nil {
		t.Fatal(err)
	}
	if c, _ := CertFiles(dir, auth.Site, "long"); readCert(t, c).NotAfter.After(caCert.NotAfter) {
		t.Error("the certificate outlives its CA")
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGossipKeys(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gossip.key")
	if err := WriteGossipKey(path, false); err != nil {
		t.Fatal(err)
	}
	k, others, err := ReadGossipKeys(path)
	if err != nil || len(k) != GossipKeyBytes || len(others) != 0 {
		t.Fatalf("read back %d bytes, %d others, %v", len(k), len(others), err)
	}
	other := filepath.Join(dir, "other.key")
	if err := WriteGossipKey(other, false); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(path)
	b, _ := os.ReadFile(other)
	both := filepath.Join(dir, "both.key")
	if err := os.WriteFile(both, append(append([]byte("# rotation\n"), b...), a...), 0o600); err != nil {
		t.Fatal(err)
	}
	k2, others, err := ReadGossipKeys(both)
	if err != nil || len(others) != 1 || string(others[0]) != string(k) || string(k2) == string(k) {
		t.Errorf("rotation file: primary %x, others %x, %v", k2, others, err)
	}
	for name, tc := range map[string]struct {
		data string
		mode os.FileMode
	}{
		"readable by others": {string(a), 0o644},
		"not base64":         {"not base64!\n", 0o600},
		"wrong size":         {"AAAA\n", 0o600},
		"empty":              {"# nothing\n", 0o600},
	} {
		p := filepath.Join(dir, "bad.key")
		os.Remove(p)
		if err := os.WriteFile(p, []byte(tc.data), tc.mode); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ReadGossipKeys(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzReadGossipKeys(f *testing.F) {
	f.Add([]byte("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"))
	f.Add([]byte("# c\n\n  x  \n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "k")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		k, others, err := ReadGossipKeys(p)
		if err != nil {
			return
		}
		for _, key := range append(others, k) {
			if n := len(key); n != 16 && n != 24 && n != 32 {
				t.Fatalf("accepted a %d-byte key", n)
			}
		}
	})
}
