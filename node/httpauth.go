package node

import (
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/config"
)

// httpSecurity is the HTTP listener's share of the site's security: the
// API's mutual TLS, and the same rule for who may look. The metrics and the
// status page show every job (users, commands), so they are for operators
// and sites; a user is refused (its jobs: `fedsched jobs`). Without
// certificates the listener needs --insecure, on loopback.
func httpSecurity(cfg config.Config, sec *security) (*tls.Config, func(http.Handler) http.Handler, error) {
	if sec.tls == nil {
		if !sec.insecure {
			return nil, nil, fmt.Errorf("http.listen: the metrics and status page show every job; serve them with certificates (tls.*) or, for development, --insecure on loopback: %w", ErrInvalidRequest)
		}
		if !config.Loopback(cfg.HTTP.Listen) {
			return nil, nil, fmt.Errorf("http.listen %q: --insecure serves plaintext, so only on loopback: %w", cfg.HTTP.Listen, ErrInvalidRequest)
		}
		return nil, nil, nil
	}
	authorize := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The handshake verified the chain (RequireAndVerifyClientCert).
			if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
				http.Error(w, "Unauthenticated: present a certificate of the site's CA", http.StatusUnauthorized)
				return
			}
			id, err := auth.FromCertificate(r.TLS.VerifiedChains[0][0])
			if err != nil {
				http.Error(w, "Unauthenticated: "+err.Error(), http.StatusUnauthorized)
				return
			}
			if id.Kind != auth.Operator && id.Kind != auth.Site {
				http.Error(w, fmt.Sprintf("PermissionDenied: %v may not see the site's metrics and status page: they need an operator or a site", id), http.StatusForbidden)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	return sec.tls.ServerConfig(), authorize, nil
}
