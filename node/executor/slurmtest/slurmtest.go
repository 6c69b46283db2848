// Package slurmtest is what the Slurm tests of every package share: they
// run against a real local Slurm (scripts/slurm-up.sh, which .ci/run
// starts) and skip, saying why, where there is none.
package slurmtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Require skips t unless SLURM_CONF is set and the Slurm commands are on
// PATH, and fails it if SLURM_CONF is set but slurmctld does not answer
// (a Slurm that was meant to be there and is not).
func Require(t testing.TB) {
	t.Helper()
	conf := os.Getenv("SLURM_CONF")
	if conf == "" {
		t.Skip("SKIP Slurm tests: SLURM_CONF is not set; as root run `export SLURM_CONF=$(scripts/slurm-up.sh | tail -1)` (installs and starts a local Slurm)")
	}
	if _, err := exec.LookPath("sbatch"); err != nil {
		t.Skip("SKIP Slurm tests: sbatch is not on PATH; run scripts/slurm-up.sh as root")
	}
	if out, err := exec.Command("scontrol", "ping").CombinedOutput(); err != nil || !strings.Contains(string(out), "UP") {
		t.Fatalf("SLURM_CONF=%s is set but slurmctld does not answer (run scripts/slurm-up.sh): %v %s", conf, err, out)
	}
}
