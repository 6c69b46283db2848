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

	"github.com/fedsched/fedsched/node"
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

// TestMutualTLS starts a site with a certificate and a CA: a client with a
// certificate from the CA is served; one without a certificate, one with a
// certificate from another CA and a plaintext one are refused.
func TestMutualTLS(t *testing.T) {
	ca := newTestCA(t)
	cfg := testConfig(t.TempDir())
	cfg.TLS.Cert, cfg.TLS.Key = ca.issue(t, "site", 2)
	cfg.TLS.CA = filepath.Join(ca.dir, "ca.pem")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Launch(ctx, cfg, node.LaunchOptions{Listener: lis}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	addr := lis.Addr().String()
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	userCert, userKey := ca.issue(t, "user", 3)
	good, err := tls.LoadX509KeyPair(userCert, userKey)
	if err != nil {
		t.Fatal(err)
	}
	other := newTestCA(t)
	oc, ok := other.issue(t, "intruder", 4)
	bad, err := tls.LoadX509KeyPair(oc, ok)
	if err != nil {
		t.Fatal(err)
	}
	call := func(creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		var last error
		for i := 0; i < 100; i++ { // the node recovers before it serves
			cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
			_, last = fedschedv1.NewSiteServiceClient(conn).GetSite(cctx, &fedschedv1.GetSiteRequest{})
			ccancel()
			if last == nil || !isUnavailableRecovering(last) {
				return last
			}
			time.Sleep(10 * time.Millisecond)
		}
		return last
	}
	if err := call(credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{good}})); err != nil {
		t.Fatalf("client with a certificate from the CA: %v", err)
	}
	for name, creds := range map[string]credentials.TransportCredentials{
		"no client certificate": credentials.NewTLS(&tls.Config{RootCAs: pool}),
		"another CA":            credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{bad}}),
		"plaintext":             insecure.NewCredentials(),
	} {
		if err := call(creds); err == nil {
			t.Errorf("%s: served", name)
		}
	}
}

func isUnavailableRecovering(err error) bool {
	return node.CodeOf(node.FromStatus(err)) == codes.Unavailable && strings.Contains(err.Error(), "recovering")
}
