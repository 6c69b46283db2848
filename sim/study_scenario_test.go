package sim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStudyScenarios: every setup file of the study parses, names its
// sites after the traces (kth, ctc, sdsc) and ends with its sites, so that
// a setup can be extended by appending sites.
func TestStudyScenarios(t *testing.T) {
	files, err := filepath.Glob("../scenarios/study/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no study scenarios: %v", err)
	}
	for _, f := range files {
		sc, err := LoadScenario(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for _, s := range sc.Sites {
			if !strings.Contains(s.Name, s.Trace) {
				t.Errorf("%s: site %s runs trace %s: its name should say so", f, s.Name, s.Trace)
			}
		}
		b, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		last := ""
		for _, l := range lines {
			if l != "" && l[0] != ' ' && l[0] != '#' {
				last = l
			}
		}
		if last != "sites:" {
			t.Errorf("%s: last top-level key %q, want sites:", f, last)
		}
	}
}

// TestStudyStrategyScenarioRefuses: the settings a study strategy would
// ignore are refused, naming the field.
func TestStudyStrategyScenarioRefuses(t *testing.T) {
	base := "name: x\ntransfer: %s\n%ssites:\n  - name: a\n    trace: kth\n%s  - name: b\n    trace: kth\n"
	for _, tc := range []struct{ transfer, top, site, want string }{
		{"shaking-g", "max_candidates: 2\n", "", "max_candidates"},
		{"serf", "latency: 5\n", "", "latency"},
		{"central-full", "", "    policy: fcfs\n", "policy"},
		{"shaking-g", "", "    prefer: [b]\n", "prefer"},
		{"serf", "", "    deadlines: {factor: 2}\n", "deadlines"},
		{"serf", "shaking_depth: 1\n", "", "shaking_depth"},
		{"shaking-g", "shaking_depth: 3\n", "", "shaking_depth"},
	} {
		doc := strings.Replace(strings.Replace(strings.Replace(base, "%s", tc.transfer, 1), "%s", tc.top, 1), "%s", tc.site, 1)
		_, err := ParseScenario([]byte(doc))
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with %q%q: err %v, want a refusal naming %s", tc.transfer, tc.top, tc.site, err, tc.want)
		}
	}
	for _, tr := range []string{"central-full", "serf", "shaking-g"} {
		doc := strings.Replace(strings.Replace(strings.Replace(base, "%s", tr, 1), "%s", "", 1), "%s", "    policy: easy\n", 1)
		sc, err := ParseScenario([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", tr, err)
		}
		cfg, err := sc.Build()
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Central != nil || cfg.Shaking != nil; !got {
			t.Errorf("%s: config %+v runs neither the coordinator nor Shaking-G", tr, cfg)
		}
	}
}
