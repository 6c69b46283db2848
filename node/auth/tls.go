package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSFiles are the PEM files of one party: the CA every peer must chain
// to, its own certificate and key.
type TLSFiles struct {
	CA, Cert, Key string
}

// Material is loaded TLS files.
type Material struct {
	Pool *x509.CertPool
	Cert tls.Certificate
	// Self is the identity in Cert.
	Self Identity
}

// Load reads the files and checks that the certificate chains to the CA
// and names a fedsched identity.
func (f TLSFiles) Load() (*Material, error) {
	if f.CA == "" || f.Cert == "" || f.Key == "" {
		return nil, errors.New("tls: the CA, the certificate and its key are all needed")
	}
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls ca %s holds no PEM certificate", f.CA)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("tls certificate %s and key %s: %w", f.Cert, f.Key, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls certificate %s: %w", f.Cert, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("tls certificate %s does not chain to the CA %s: %w", f.Cert, f.CA, err)
	}
	self, err := FromCertificate(leaf)
	if err != nil {
		return nil, fmt.Errorf("tls certificate %s: %w (make one with `fedsched tls cert create`)", f.Cert, err)
	}
	return &Material{Pool: pool, Cert: cert, Self: self}, nil
}

// ServerConfig is the TLS configuration of a site's API: every client must
// present a certificate that chains to the CA (mutual TLS); what it may do
// is decided per call from the identity in it.
func (m *Material) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{m.Cert},
		ClientCAs: m.Pool, ClientAuth: tls.RequireAndVerifyClientCert}
}

// ClientConfig is the TLS configuration of a connection to a site: the
// server must present a certificate of the CA that names a site identity,
// and, when site is not empty, that very site. Host names are not checked
// (sites are dialed by the addresses they gossip): the identity URI is what
// counts.
func (m *Material) ClientConfig(site string) *tls.Config {
	return ClientConfig(m.Pool, []tls.Certificate{m.Cert}, site)
}

// ClientConfig is Material.ClientConfig for a client that may have no
// certificate of its own.
func ClientConfig(pool *x509.CertPool, certs []tls.Certificate, site string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: certs,
		// The standard check compares host names; VerifyConnection below
		// does the whole check instead: chain and identity.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			id, err := VerifyChain(pool, cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
			if err != nil {
				return err
			}
			if id.Kind != Site {
				return fmt.Errorf("the server presents a certificate of %v, not of a site", id)
			}
			if site != "" && id.Name != site {
				return fmt.Errorf("the server presents the certificate of site %s, not of site %s", id.Name, site)
			}
			return nil
		},
	}
}

// VerifyChain checks that certs (leaf first) chain to pool for usage and
// returns the leaf's identity.
func VerifyChain(pool *x509.CertPool, certs []*x509.Certificate, usage x509.ExtKeyUsage) (Identity, error) {
	if len(certs) == 0 {
		return Identity{}, errors.New("no certificate presented")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return Identity{}, fmt.Errorf("certificate not trusted: %w", err)
	}
	return FromCertificate(certs[0])
}
