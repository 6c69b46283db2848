package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestSimJSONToStdoutIsJSONAlone: with --json -, stdout is one JSON document
// in every mode (the human table goes to stderr), so that scripts can pipe
// it into a parser.
func TestSimJSONToStdoutIsJSONAlone(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.swf")
	b := filepath.Join(dir, "b.swf")
	swf := "; MaxProcs: 4\n1 0 0 10 2 -1 -1 2 20 -1 1 1 1 1 1 1 -1 -1\n2 1 0 10 4 -1 -1 4 20 -1 1 1 1 1 1 1 -1 -1\n3 2 0 10 1 -1 -1 1 20 -1 1 1 1 1 1 1 -1 -1\n"
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte(swf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sc := filepath.Join(dir, "sc.yaml")
	if err := os.WriteFile(sc, []byte("transfer: p-easy\nsites:\n  - {name: a, trace: "+a+"}\n  - {name: b, trace: "+b+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--trace", a, "--policy", "easy"},
		{"--scenario", sc},
		{"--trace", "kth", "--strategy", "backfill", "--jobs", "50", "--runs", "1", "--train-jobs", "50"},
	} {
		out, err := simCLI(append(args, "--json", "-")...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Errorf("%v: stdout is not JSON alone: %v\n%s", args, err, out)
		}
	}
}
