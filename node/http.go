package node

import (
	"bytes"
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fedsched/fedsched/gantt"
	"github.com/fedsched/fedsched/node/auth"
)

func onlyUser(id auth.Identity) string {
	if id.Kind == auth.User {
		return id.Name
	}
	return ""
}

// HTTPHandler serves the node's HTTP listener: Prometheus metrics at
// /metrics, the status page at / and its Gantt chart alone at /plan.svg.
// Every request passes through authorize first when it is not nil: the
// place where the site's authorization policy (docs/security.md) decides
// who may read what, and puts the caller's identity in the request's
// context (auth.WithIdentity) for the pages to show a user its own jobs;
// nil serves everything to everyone the listener lets in.
func (n *Node) HTTPHandler(authorize func(http.Handler) http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.metrics.reg, promhttp.HandlerOpts{ErrorLog: nil, Registry: n.metrics.reg}))
	mux.HandleFunc("GET /{$}", n.serveStatus)
	mux.HandleFunc("GET /plan.svg", n.servePlanSVG)
	var h http.Handler = mux
	if authorize != nil {
		h = authorize(h)
	}
	return h
}

// ServeHTTP serves h on lis until ctx ends, with TLS when tlsConfig is not
// nil (the API's certificate and client-certificate policy).
func ServeHTTP(ctx context.Context, lis net.Listener, h http.Handler, tlsConfig *tls.Config) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsConfig}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx) //nolint:errcheck // the listener closes either way
	}()
	var err error
	if tlsConfig != nil {
		err = srv.ServeTLS(lis, "", "")
	} else {
		err = srv.Serve(lis)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if ctx.Err() == nil && err == nil {
		err = fmt.Errorf("http server on %s stopped", lis.Addr())
	}
	<-done
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("serve http %s: %w", lis.Addr(), err)
	}
	return nil
}

// viewer is who asks for a page: the identity the listener's authorization
// found, or, on a listener without one (--insecure), an insecure caller,
// who sees everything.
func viewer(r *http.Request) auth.Identity {
	if id, ok := auth.FromContext(r.Context()); ok {
		return id
	}
	return auth.Identity{Kind: auth.Insecure, UID: -1, Via: auth.ViaPlaintext}
}

func (n *Node) servePlanSVG(w http.ResponseWriter, r *http.Request) {
	snap, err := n.Snapshot(r.Context())
	if err != nil {
		http.Error(w, "the site cannot answer now: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	snap = snap.seenBy(viewer(r))
	w.Header().Set("Content-Type", "image/svg+xml")
	PlanChart(n.planResponse(snap)).SVG(w, 0) //nolint:errcheck // the client went away
}

//go:embed status.html
var statusHTML string

var statusTmpl = template.Must(template.New("status").Funcs(template.FuncMap{
	"time": func(sec int64) string {
		if sec <= 0 {
			return "-"
		}
		return humanTime(sec)
	},
	"clock": func(sec int64) string {
		if sec <= 0 {
			return "-"
		}
		return time.Unix(sec, 0).UTC().Format("15:04:05")
	},
	"pct": func(a, b int) int { return 100 * a / max(b, 1) },
	// when is a time of the jobs table: the clock time alone (with its
	// zone) on the site's day, with the date otherwise.
	"when": func(sec, now int64) string {
		if sec <= 0 {
			return "-"
		}
		t := time.Unix(sec, 0).UTC()
		if t.Format("2006-01-02") == time.Unix(now, 0).UTC().Format("2006-01-02") {
			return t.Format("15:04:05Z")
		}
		return t.Format("Jan 2 15:04:05Z")
	},
	"lower": strings.ToLower,
	"pof":   func(p float64) string { return fmt.Sprintf("%.3f", p) },
}).Parse(statusHTML))

// statusPage is what the status template renders.
type statusPage struct {
	*SiteSnapshot
	Version, Executor string
	Gantt             template.HTML
	Active, Ended     []JobView
	Delegated, Hosted []AgreementView
	Horizon           string
	Busy              int
	// OnlyUser is the user whose page this is (it shows that user's jobs
	// only); empty for operators and sites, who see every job.
	OnlyUser string
}

func (n *Node) serveStatus(w http.ResponseWriter, r *http.Request) {
	snap, err := n.Snapshot(r.Context())
	if err != nil {
		http.Error(w, "the site cannot answer now: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	snap = snap.seenBy(viewer(r))
	var svg bytes.Buffer
	c := PlanChart(n.planResponse(snap))
	if err := c.SVG(&svg, 1160); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	p := statusPage{SiteSnapshot: snap, Version: n.deps.Version, Executor: n.cfg.Executor, Busy: snap.Procs - snap.Free,
		OnlyUser: onlyUser(viewer(r)),
		Gantt:    template.HTML(svg.String()), Horizon: strings.TrimPrefix(gantt.Offset((snap.Until-snap.Now+59)/60*60), "+")} //nolint:gosec // built by gantt, every text escaped
	for _, j := range snap.Jobs {
		j.Now = snap.Now
		if j.State == "RUNNING" {
			j.Reason = "running; killed at " + time.Unix(j.End, 0).UTC().Format("15:04:05Z") + " if not done"
		}
		if j.State == "PENDING" || j.State == "RUNNING" {
			p.Active = append(p.Active, j)
		} else {
			p.Ended = append(p.Ended, j)
		}
	}
	for _, a := range snap.Agreements {
		if a.Role == roleOrigin {
			p.Delegated = append(p.Delegated, a)
		} else {
			p.Hosted = append(p.Hosted, a)
		}
	}
	var b bytes.Buffer
	if err := statusTmpl.Execute(&b, p); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b.Bytes()) //nolint:errcheck // the client went away
}
