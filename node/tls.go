package node

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fedsched/fedsched/node/config"
)

// TLSCredentials builds the gRPC credentials of a site from its TLS
// settings: the server side (its certificate; with a CA, every client —
// users and peers alike — must present a certificate that chains to it:
// mutual TLS) and the client side it uses to dial peers (its certificate,
// and the CA to verify theirs). Without a certificate both are plaintext;
// ok is then false and the caller logs a warning.
func TLSCredentials(t config.TLS) (server, client credentials.TransportCredentials, ok bool, err error) {
	if t.Cert == "" {
		return insecure.NewCredentials(), insecure.NewCredentials(), false, nil
	}
	srv, cli, err := tlsConfigs(t)
	if err != nil {
		return nil, nil, false, err
	}
	return credentials.NewTLS(srv), credentials.NewTLS(cli), true, nil
}

// tlsConfigs loads the server and client TLS configurations of t (which
// must name a certificate); the HTTP listener serves with the same server
// side as the API.
func tlsConfigs(t config.TLS) (srv, cli *tls.Config, err error) {
	cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls certificate %s and key %s: %w: %w", t.Cert, t.Key, ErrInvalidRequest, err)
	}
	srv = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	cli = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, nil, fmt.Errorf("tls ca: %w: %w", ErrInvalidRequest, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("tls ca %s holds no PEM certificate: %w", t.CA, ErrInvalidRequest)
		}
		srv.ClientCAs, srv.ClientAuth = pool, tls.RequireAndVerifyClientCert
		cli.RootCAs = pool
	}
	return srv, cli, nil
}
