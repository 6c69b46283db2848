package node_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/pki"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// testCA makes a CA and certificates it signs, written as PEM files.
type testCA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fedsched test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{dir: t.TempDir(), cert: cert, key: key}
	writePEM(t, filepath.Join(ca.dir, "ca.pem"), "CERTIFICATE", der)
	return ca
}

// issue writes name.pem and name-key.pem for a certificate valid for
// 127.0.0.1, usable by servers and clients.
func (ca *testCA) issue(t *testing.T, name string, serial int64) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(ca.dir, name+".pem"), filepath.Join(ca.dir, name+"-key.pem")
	writePEM(t, certPath, "CERTIFICATE", der)
	writePEM(t, keyPath, "EC PRIVATE KEY", kb)
	return certPath, keyPath
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMutualTLS starts a site with its site certificate and the CA: a
// client with a user certificate from the CA is served; one without a
// certificate, one with a certificate from another CA, one from the same CA
// without a fedsched identity and a plaintext one are refused, each with
// the code that says why.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	if err := pki.CreateCA(dir, "test CA", pki.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []struct {
		k    auth.Kind
		name string
	}{{auth.Site, "t"}, {auth.User, "alice"}} {
		if err := pki.CreateCert(dir, id.k, id.name, pki.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig(t.TempDir())
	cfg.TLS.Cert, cfg.TLS.Key = pki.CertFiles(dir, auth.Site, "t")
	cfg.TLS.CA = filepath.Join(dir, pki.CAFile)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan string, 1)
	go func() { done <- node.Launch(ctx, cfg, node.LaunchOptions{Listener: lis, Ready: ready}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the site did not start: %v", err)
	}
	addr := lis.Addr().String()
	userCert, userKey := pki.CertFiles(dir, auth.User, "alice")
	good, err := tls.LoadX509KeyPair(userCert, userKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(cfg.TLS.CA)
	pool.AppendCertsFromPEM(caPEM)
	other := newTestCA(t)
	oc, ok := other.issue(t, "intruder", 4)
	bad, err := tls.LoadX509KeyPair(oc, ok)
	if err != nil {
		t.Fatal(err)
	}
	// A certificate of the right CA that names no fedsched identity.
	caCert, caKey, err := pki.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	anon := (&testCA{dir: t.TempDir(), cert: caCert, key: caKey})
	ac, ak := anon.issue(t, "anonymous", 5)
	anonCert, err := tls.LoadX509KeyPair(ac, ak)
	if err != nil {
		t.Fatal(err)
	}
	call := func(creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		_, err = fedschedv1.NewSiteServiceClient(conn).GetSite(cctx, &fedschedv1.GetSiteRequest{})
		return err
	}
	if err := call(credentials.NewTLS(auth.ClientConfig(pool, []tls.Certificate{good}, "t"))); err != nil {
		t.Fatalf("client with a user certificate from the CA: %v", err)
	}
	for name, tc := range map[string]struct {
		creds credentials.TransportCredentials
		code  codes.Code
	}{
		"no client certificate": {credentials.NewTLS(auth.ClientConfig(pool, nil, "t")), codes.Unavailable},
		"another CA":            {credentials.NewTLS(auth.ClientConfig(pool, []tls.Certificate{bad}, "t")), codes.Unavailable},
		"no identity":           {credentials.NewTLS(auth.ClientConfig(pool, []tls.Certificate{anonCert}, "t")), codes.Unauthenticated},
		"plaintext":             {insecure.NewCredentials(), codes.Unavailable},
	} {
		if err := call(tc.creds); status.Code(err) != tc.code {
			t.Errorf("%s: got %v, want code %v", name, err, tc.code)
		}
	}
	// The client refuses a server that is not the site it wants.
	if err := call(credentials.NewTLS(auth.ClientConfig(pool, []tls.Certificate{good}, "other"))); err == nil || !strings.Contains(err.Error(), "not of site other") {
		t.Errorf("dialing site other at t's address: %v, want a refusal naming the sites", err)
	}
}

func isUnavailableRecovering(err error) bool {
	return node.CodeOf(node.FromStatus(err)) == codes.Unavailable && strings.Contains(err.Error(), "recovering")
}
