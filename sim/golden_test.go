package sim

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/fedsched/fedsched/plan"
	"github.com/fedsched/fedsched/swf"
	"github.com/fedsched/fedsched/traces"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite sim/testdata/kth-golden.txt from the current code")

// TestKTHGolden pins the full KTH replay as `fedsched sim --trace kth`
// runs it (the trace as recorded, not sanitised) under every queue policy:
// AWRT, utilisation and the other metrics to the last digit, and a hash of
// every job's decision, start and end. Performance work must leave them
// unchanged; a deliberate change of behaviour regenerates the file with
// go test ./sim/ -run KTHGolden -update-golden and says why in its commit.
func TestKTHGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("full KTH replays")
	}
	rc, err := traces.Open(traces.KTH)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr, err := swf.Read(rc, traces.KTH, swf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	procs := int(tr.Header.Procs())
	jobs := FromSWF(tr.Jobs)
	var b strings.Builder
	for _, pol := range policies {
		res, err := Run(context.Background(), jobs, Config{Name: "golden", Site: plan.Config{Procs: procs, Policy: pol}})
		if err != nil {
			t.Fatal(err)
		}
		m := ComputeMetrics(res.Records, procs)
		h := sha256.New()
		for _, r := range res.Records {
			fmt.Fprintf(h, "%d %v %v %d %d %v\n", r.ID, r.Decision, r.Started, r.Start, r.End, r.Killed)
		}
		fmt.Fprintf(&b, "%s jobs=%d awrt=%v awwt=%v utilisation=%v makespan=%d bsld=%v records=%x\n",
			pol, m.Jobs, m.AWRT, m.AWWT, m.Utilization, m.Makespan, m.BoundedSlowdown, h.Sum(nil))
	}
	const path = "testdata/kth-golden.txt"
	if *updateGolden {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("KTH replay changed:\n got %s\nwant %s", got, want)
	}
}
