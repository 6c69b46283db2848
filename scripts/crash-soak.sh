#!/usr/bin/env bash
# Kills `fedsched node` with SIGKILL N times under concurrent clients, with
# the simulated executor and with the process executor (jobs that really
# run), and prints one summary line per executor: kills, requests
# acknowledged, jobs, lost (must be 0), duplicated (must be 0), and the
# seed that reproduces the run. The tests are TestSIGKILLSimulated and
# TestSIGKILLProcess in cmd/fedsched/crash_test.go; see docs/operations.md.
# Usage: scripts/crash-soak.sh [N] [SEED]   (from the repository root;
# N defaults to 1000, SEED to the clock)
set -euo pipefail
n=${1:-1000}
seed=${2:-0}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# Each kill takes a fraction of a second; allow a generous bound.
go test ./cmd/fedsched -run '^TestSIGKILL(Simulated|Process)$' -count=1 -v -timeout "$((n / 2 + 600))s" \
  -args -crash.kills "$n" -crash.seed "$seed" >"$log" 2>&1 || status=$?
grep -E -- '--- (FAIL|PASS)|SUMMARY' "$log" | sed 's/^ *//'
if [ "$status" -ne 0 ]; then
  grep -v '^ *time=' "$log" | tail -40
  exit "$status"
fi
