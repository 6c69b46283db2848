package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedsched/fedsched/node/executor/slurmtest"
)

// TestSimExperimentSlurm: a small experiment (two transfers x two seeds x
// two replications: eight cells of a few seconds) run locally and
// dispatched as a Slurm job array by the real fedsched binary gives
// byte-identical CSVs, and every cell ran as an array task (its log and
// rows are in the shared directory).
func TestSimExperimentSlurm(t *testing.T) {
	slurmtest.Require(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "fedsched")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	files := map[string]string{
		"sc.yaml":  "name: small\nspan: 2d\nsites:\n  - {name: a, trace: kth}\n  - {name: b, trace: kth, skip: 3000}\n",
		"exp.yaml": "name: slurm-check\ngrid:\n  scenarios: [sc.yaml]\n  transfers: [acf, p-easy]\n  seeds: [1, 2]\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sim := func(args ...string) {
		t.Helper()
		c := exec.Command(bin, append([]string{"sim", "--experiment", "exp.yaml", "--runs", "2"}, args...)...)
		c.Dir = dir
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("fedsched sim %v: %v\n%s", args, err, out)
		}
	}
	sim("--csv", "local.csv")
	sim("--csv", "slurm.csv", "--slurm", "--slurm-dir", "parts")
	local, err := os.ReadFile(filepath.Join(dir, "local.csv"))
	if err != nil {
		t.Fatal(err)
	}
	dispatched, err := os.ReadFile(filepath.Join(dir, "slurm.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(local, []byte("\n")); n != 1+8*2 {
		t.Fatalf("the local CSV has %d lines, want a header and 16 rows", n)
	}
	if !bytes.Equal(local, dispatched) {
		t.Fatalf("the CSVs differ:\nlocal:\n%s\nslurm:\n%s", local, dispatched)
	}
	for i := range 8 {
		for _, f := range []string{"cell-%d.log", "cell-%d.json"} {
			p := filepath.Join(dir, "parts", strings.Replace(f, "%d", string(rune('0'+i)), 1))
			if _, err := os.Stat(p); err != nil {
				t.Errorf("cell %d did not run as an array task: %v", i, err)
			}
		}
	}
}
