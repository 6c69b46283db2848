package node

import (
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/config"
)

// httpSecurity is the HTTP listener's share of the site's security: the
// API's mutual TLS, and the same rules for who may see what. The metrics
// count every user's jobs, so they are for operators and sites; the status
// page and /plan.svg show a user its own jobs (SiteSnapshot.seenBy), and
// operators and sites everything. Without certificates the listener needs
// --insecure, on loopback, and shows everything to everyone.
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
			switch {
			case id.Kind == auth.Operator || id.Kind == auth.Site:
			case id.Kind == auth.User && r.URL.Path != "/metrics":
			default:
				http.Error(w, fmt.Sprintf("PermissionDenied: %v may not see %s: it needs an operator or a site identity (a user sees its own jobs on the status page, /)", id, r.URL.Path), http.StatusForbidden)
				return
			}
			h.ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), id)))
		})
	}
	return sec.tls.ServerConfig(), authorize, nil
}
