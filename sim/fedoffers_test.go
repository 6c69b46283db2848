package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// manySites is twelve sites of 8 to 64 processors sharing one KTH slice
// at a load of 1.1, asking maxCandidates peers per offer.
func manySites(t *testing.T, maxCandidates int) FedConfig {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "max_candidates: %d\nworkload: {trace: kth, skip: 2000, jobs: 3000, span: 40000, min_estimate: 60, max_estimate: 3600, load: 1.1}\nsites:\n", maxCandidates)
	for i := range 12 {
		fmt.Fprintf(&b, "  - name: s%02d\n    procs: %d\n    share: %d\n", i, []int{8, 16, 32, 64}[i%4], 1+i%3)
	}
	sc, err := ParseScenario([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sc.Build()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestKeptStartableUnasked: asking one peer per offer, a site keeps jobs
// that a peer it did not ask could have started at once; asking every
// peer, it never does (every peer that could was asked). Kept jobs are
// offered ones, and asking more peers sends more quote requests.
func TestKeptStartableUnasked(t *testing.T) {
	sum := func(xs []int) (n int) {
		for _, x := range xs {
			n += x
		}
		return n
	}
	results := map[int]*FedResult{}
	for _, mc := range []int{1, 11} {
		res, err := RunFederation(context.Background(), manySites(t, mc))
		if err != nil {
			t.Fatal(err)
		}
		results[mc] = res
		offered, kept, startable := sum(res.Offered), sum(res.Kept), sum(res.KeptStartable)
		t.Logf("max_candidates %d: offered %d, kept %d, startable by an unasked peer %d; messages %v", mc, offered, kept, startable, res.Messages)
		if kept == 0 || kept > offered || startable > kept {
			t.Fatalf("max_candidates %d: offered %d, kept %d, startable %d", mc, offered, kept, startable)
		}
		if got, want := res.Messages["quote"], res.Messages["quote-request"]; got != want {
			t.Fatalf("%d quotes for %d quote requests (no loss)", got, want)
		}
	}
	if n := sum(results[1].KeptStartable); n == 0 {
		t.Error("asking one peer, no kept job was startable by an unasked peer")
	}
	if n := sum(results[11].KeptStartable); n != 0 {
		t.Errorf("asking every peer, %d kept jobs were startable by an unasked peer", n)
	}
	if a, b := results[1].Messages["quote-request"], results[11].Messages["quote-request"]; a >= b {
		t.Errorf("quote requests: %d asking one peer, %d asking all", a, b)
	}
}
