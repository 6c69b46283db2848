#!/usr/bin/env bash
# Kills `fedsched node` with SIGKILL N times under concurrent clients, with
# the simulated executor and with the process executor (jobs that really
# run), and prints one summary line per executor: kills, requests
# acknowledged, jobs, lost (must be 0), duplicated (must be 0), and the
# seed that reproduces the run. The tests are TestSIGKILLSimulated and
# TestSIGKILLProcess in cmd/fedsched/crash_test.go (they run side by side);
# see docs/operations.md, "SIGKILL tests".
# Usage: scripts/crash-soak.sh [N] [SEED]   (from the repository root;
# N defaults to 1000, SEED to the clock)
set -uo pipefail
n=${1:-1000}
seed=${2:-0}
dir=$(mktemp -d)
go test -c -o "$dir/fedsched.test" ./cmd/fedsched || exit 1
pids=()
for t in Simulated Process; do
  # A kill takes a fraction of a second; the bound is generous.
  "$dir/fedsched.test" -test.run "^TestSIGKILL$t\$" -test.count 1 -test.v -test.timeout "$((n * 3 + 600))s" \
    -crash.kills "$n" -crash.seed "$seed" >"$dir/$t.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do
  wait "$p" || status=1
done
for t in Simulated Process; do
  grep -E -- '--- (FAIL|PASS)|SUMMARY' "$dir/$t.log" | sed 's/^ *//'
done
if [ "$status" -ne 0 ]; then
  echo "FAILED; logs kept in $dir" >&2
  exit 1
fi
rm -rf "$dir"
