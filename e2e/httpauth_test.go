package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fedsched/fedsched/node/auth"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestHTTPFollowsTheAPIRules: over mutual TLS, a user's status page and
// plan show that user's jobs and only the processors and times of other
// users' (no ids, no names); /metrics needs an operator or a site; an
// operator and a site see every job. GetPlan over gRPC gives a user the
// same view.
func TestHTTPFollowsTheAPIRules(t *testing.T) {
	t.Parallel()
	c := start(t, Options{TimeScale: 1, HTTP: true, Sites: []SiteConfig{{Name: "a", Procs: 2}}})
	a := c.Site("a")
	client := func(k auth.Kind, name string) fedschedv1.SiteServiceClient {
		creds, err := c.ClientCredentials(k, name)
		if err != nil {
			t.Fatal(err)
		}
		return fedschedv1.NewSiteServiceClient(dial(t, a.Addr(), creds))
	}
	alice, bob := client(auth.User, "alice"), client(auth.User, "bob")
	// One job of each running, and one of bob's waiting.
	aliceJob := mustSubmit(t, alice, &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 3600})
	bobJob := mustSubmit(t, bob, &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 3600})
	bobWaiting := mustSubmit(t, bob, &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 3600})

	get := func(k auth.Kind, name, path string) (int, string) {
		t.Helper()
		if err := c.IssueCert(k, name); err != nil {
			t.Fatal(err)
		}
		m, err := c.Files(k, name).Load()
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: auth.ClientConfig(m.Pool, []tls.Certificate{m.Cert}, "a")}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get("https://" + a.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	bobs := []string{bobJob.GetId(), bobWaiting.GetId(), "bob"}
	for _, path := range []string{"/", "/plan.svg"} {
		code, body := get(auth.User, "alice", path)
		if code != http.StatusOK || !strings.Contains(body, aliceJob.GetId()) {
			t.Fatalf("alice's %s: %d, her job %s shown: %v", path, code, aliceJob.GetId(), strings.Contains(body, aliceJob.GetId()))
		}
		for _, s := range bobs {
			if strings.Contains(body, s) {
				t.Errorf("alice's %s shows %q of bob's", path, s)
			}
		}
		if n := strings.Count(body, `data-job=""`); path == "/plan.svg" && n != 2 {
			t.Errorf("alice's plan shows %d unnamed jobs; want bob's 2", n)
		}
		for _, who := range []struct {
			k    auth.Kind
			name string
		}{{auth.Operator, "ops"}, {auth.Site, "b"}} {
			code, body := get(who.k, who.name, path)
			if code != http.StatusOK || !strings.Contains(body, aliceJob.GetId()) || !strings.Contains(body, bobWaiting.GetId()) {
				t.Errorf("%v %s's %s: %d; want every job", who.k, who.name, path, code)
			}
		}
	}
	if code, body := get(auth.User, "alice", "/metrics"); code != http.StatusForbidden || !strings.Contains(body, "operator or a site") {
		t.Errorf("alice's /metrics: %d %q; want 403 saying who may", code, body)
	}
	for _, k := range []auth.Kind{auth.Operator, auth.Site} {
		if code, body := get(k, "m", "/metrics"); code != http.StatusOK || !strings.Contains(body, "fedsched_") {
			t.Errorf("%v's /metrics: %d", k, code)
		}
	}

	plan, err := alice.GetPlan(bg(t), &fedschedv1.GetPlanRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var mine, others int
	for _, e := range append(plan.GetEntries(), plan.GetQueued()...) {
		switch {
		case e.GetId() == aliceJob.GetId() && e.GetUser() == "alice":
			mine++
		case e.GetId() == "" && e.GetUser() == "" && e.GetName() == "" && e.GetEstimateSeconds() == 0:
			others++
		default:
			t.Errorf("alice's GetPlan shows %v", e)
		}
	}
	if mine != 1 || others != 2 {
		t.Errorf("alice's GetPlan: %d of her entries, %d anonymous; want 1 and 2", mine, others)
	}
}
