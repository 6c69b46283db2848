// Package pki writes the files of a federation's trust: a certificate
// authority, certificates that name a site, user or operator identity
// (auth.URI in the URI SAN), and gossip encryption keys. It backs
// `fedsched tls` and the throwaway CAs of the demo and the e2e tests.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fedsched/fedsched/node/auth"
)

// Lifetimes. A CA outlives the certificates it signs; site certificates
// are renewed yearly, people's more often (a lost laptop).
const (
	CALifetime       = 5 * 365 * 24 * time.Hour
	SiteLifetime     = 365 * 24 * time.Hour
	PersonLifetime   = 90 * 24 * time.Hour
	backdate         = 5 * time.Minute // clock skew between sites
	CAFile           = "ca.pem"
	CAKeyFile        = "ca-key.pem"
	GossipKeyBytes   = 32 // AES-256
	certMode         = 0o644
	keyMode          = 0o600
	pemCertificate   = "CERTIFICATE"
	pemECPrivateKey  = "EC PRIVATE KEY"
	serialNumberBits = 128
)

// ErrExists is returned instead of overwriting a file.
var ErrExists = errors.New("file exists; remove it first (or pass --force)")

// Options of a write.
type Options struct {
	// Force overwrites existing files.
	Force bool
	// Lifetime overrides the default lifetime; 0 keeps it.
	Lifetime time.Duration
	// Hosts are extra DNS names and IP addresses of a site certificate
	// (for clients such as grpcurl that check host names; fedsched itself
	// checks the identity URI).
	Hosts []string
	// Now is the issue time; zero means time.Now().
	Now time.Time
}

func (o Options) now() time.Time {
	if o.Now.IsZero() {
		return time.Now()
	}
	return o.Now
}

// CreateCA writes dir/ca.pem and dir/ca-key.pem: a self-signed ECDSA P-256
// CA named name. dir is created (0700) if missing.
func CreateCA(dir, name string, o Options) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("ca directory: %w", err)
	}
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	if err := checkFree(o.Force, certPath, keyPath); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := newSerial()
	if err != nil {
		return err
	}
	now := o.now()
	life := o.Lifetime
	if life <= 0 {
		life = CALifetime
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name, Organization: []string{"fedsched"}},
		NotBefore: now.Add(-backdate), NotAfter: now.Add(life),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("create CA certificate: %w", err)
	}
	return writePair(certPath, keyPath, der, key)
}

// CertFiles returns the file names of an identity's certificate and key
// in dir: site-NAME.pem and site-NAME-key.pem, user-..., operator-....
func CertFiles(dir string, k auth.Kind, name string) (cert, key string) {
	base := filepath.Join(dir, k.String()+"-"+name)
	return base + ".pem", base + "-key.pem"
}

// CreateCert writes a certificate for identity (k, name) signed by the CA
// in dir, under the names CertFiles gives. Site certificates serve and
// dial (server and client auth); user and operator ones only dial.
func CreateCert(dir string, k auth.Kind, name string, o Options) error {
	if k != auth.Site && k != auth.User && k != auth.Operator {
		return fmt.Errorf("certificates are for sites, users and operators, not %v", k)
	}
	if err := auth.CheckName(name); err != nil {
		return err
	}
	caCert, caKey, err := LoadCA(dir)
	if err != nil {
		return err
	}
	certPath, keyPath := CertFiles(dir, k, name)
	if err := checkFree(o.Force, certPath, keyPath); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := newSerial()
	if err != nil {
		return err
	}
	now := o.now()
	life := o.Lifetime
	if life <= 0 {
		life = PersonLifetime
		if k == auth.Site {
			life = SiteLifetime
		}
	}
	notAfter := now.Add(life)
	if notAfter.After(caCert.NotAfter) {
		notAfter = caCert.NotAfter // a certificate cannot outlive its CA
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: k.String() + " " + name, Organization: []string{"fedsched"}},
		NotBefore: now.Add(-backdate), NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{auth.URI(k, name)},
	}
	if k == auth.Site {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.DNSNames = []string{name, "localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		for _, h := range o.Hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else if h != "" {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	} else if len(o.Hosts) > 0 {
		return fmt.Errorf("--host is for site certificates only")
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("sign certificate: %w", err)
	}
	return writePair(certPath, keyPath, der, key)
}

// LoadCA reads dir/ca.pem and dir/ca-key.pem.
func LoadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate (create one with `fedsched tls ca create --dir %s`): %w", dir, err)
	}
	kb, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("CA key: %w", err)
	}
	cblk, _ := pem.Decode(cb)
	if cblk == nil || cblk.Type != pemCertificate {
		return nil, nil, fmt.Errorf("%s holds no PEM certificate", filepath.Join(dir, CAFile))
	}
	cert, err := x509.ParseCertificate(cblk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	kblk, _ := pem.Decode(kb)
	if kblk == nil || kblk.Type != pemECPrivateKey {
		return nil, nil, fmt.Errorf("%s holds no PEM EC private key", filepath.Join(dir, CAKeyFile))
	}
	key, err := x509.ParseECPrivateKey(kblk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("CA key: %w", err)
	}
	return cert, key, nil
}

// WriteGossipKey writes a new random 32-byte gossip key, base64, to path
// (0600).
func WriteGossipKey(path string, force bool) error {
	if err := checkFree(force, path); err != nil {
		return err
	}
	k := make([]byte, GossipKeyBytes)
	if _, err := rand.Read(k); err != nil {
		return err
	}
	return writeFile(path, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), keyMode)
}

// ReadGossipKeys reads a gossip key file: one base64 key per line, the
// first the one that encrypts, the others (during a rotation) accepted
// too. Blank lines and lines starting with '#' are skipped. A file other
// users can read is refused: the key admits anyone to the federation.
func ReadGossipKeys(path string) (primary []byte, others [][]byte, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("gossip key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, nil, fmt.Errorf("gossip key %s is readable by others (mode %v); chmod 600 it", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("gossip key: %w", err)
	}
	var keys [][]byte
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, nil, fmt.Errorf("gossip key %s line %d: not base64: %w", path, i+1, err)
		}
		if len(k) != 16 && len(k) != 24 && len(k) != 32 {
			return nil, nil, fmt.Errorf("gossip key %s line %d: %d bytes, want 16, 24 or 32", path, i+1, len(k))
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("gossip key %s holds no key (create one with `fedsched tls gossip-key --out %s`)", path, path)
	}
	return keys[0], keys[1:], nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), serialNumberBits))
}

func checkFree(force bool, paths ...string) error {
	if force {
		return nil
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s: %w", p, ErrExists)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	// The key first: a certificate without its key is useless, a key
	// without its certificate is harmless.
	if err := writeFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: pemECPrivateKey, Bytes: kb}), keyMode); err != nil {
		return err
	}
	return writeFile(certPath, pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}), certMode)
}

// writeFile writes data with exactly mode (whatever the umask), replacing
// the file atomically.
func writeFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
