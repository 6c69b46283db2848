package e2e

import (
	"crypto/tls"
	"fmt"
	"path/filepath"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/pki"
)

// makePKI writes the cluster's throwaway CA, gossip key and the operator
// certificate its own clients use.
func (c *Cluster) makePKI() error {
	if err := pki.CreateCA(c.PKIDir(), "fedsched e2e CA", pki.Options{}); err != nil {
		return fmt.Errorf("e2e: %w", err)
	}
	if err := pki.WriteGossipKey(c.GossipKeyFile(), false); err != nil {
		return fmt.Errorf("e2e: %w", err)
	}
	if err := pki.CreateCert(c.PKIDir(), auth.Operator, "e2e", pki.Options{}); err != nil {
		return fmt.Errorf("e2e: %w", err)
	}
	return nil
}

// Secure reports whether the cluster runs with mutual TLS and encrypted
// gossip.
func (c *Cluster) Secure() bool { return !c.opts.Insecure }

// PKIDir is the directory of the cluster's CA and certificates.
func (c *Cluster) PKIDir() string { return filepath.Join(c.opts.Dir, "pki") }

// GossipKeyFile is the cluster's gossip key.
func (c *Cluster) GossipKeyFile() string { return filepath.Join(c.PKIDir(), "gossip.key") }

// Files names the CA, certificate and key of an identity of the cluster
// (the certificate exists once IssueCert or the cluster made it).
func (c *Cluster) Files(k auth.Kind, name string) auth.TLSFiles {
	cert, key := pki.CertFiles(c.PKIDir(), k, name)
	return auth.TLSFiles{CA: filepath.Join(c.PKIDir(), pki.CAFile), Cert: cert, Key: key}
}

// IssueCert makes a certificate of the cluster's CA for an identity.
func (c *Cluster) IssueCert(k auth.Kind, name string) error {
	return pki.CreateCert(c.PKIDir(), k, name, pki.Options{Force: true})
}

// ClientCredentials are the transport credentials of a client with the
// identity (k, name), whose certificate is made if missing; plaintext for
// an insecure cluster.
func (c *Cluster) ClientCredentials(k auth.Kind, name string) (credentials.TransportCredentials, error) {
	if c.opts.Insecure {
		return insecure.NewCredentials(), nil
	}
	f := c.Files(k, name)
	m, err := f.Load()
	if err != nil {
		if err := c.IssueCert(k, name); err != nil {
			return nil, err
		}
		if m, err = f.Load(); err != nil {
			return nil, err
		}
	}
	return credentials.NewTLS(auth.ClientConfig(m.Pool, []tls.Certificate{m.Cert}, "")), nil
}
