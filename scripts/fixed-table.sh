#!/usr/bin/env bash
# Prints the table of docs/fixed-reservations.md: overbooking's additional
# gain over heuristic planning with and without standing reservations, per
# trace, with the 95 % interval of the paired per-run difference.
# Usage: [POF_MAX=0.1] scripts/fixed-table.sh   (from the repository root)
set -euo pipefail
bin=$(mktemp -d)/fedsched
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/fedsched
echo "| trace | runs | standing reservations | heuristic planning gain/run | heuristic overbooking gain/run | paired difference (95 % CI) | additional gain |"
echo "|---|---|---|---|---|---|---|"
for spec in "kth 20 1000" "hpc2n 2 1000"; do
  set -- $spec
  trace=$1 runs=$2 jobs=$3
  for fixed in none 6h,1h 24h,4h,0.5 168h,12h; do
    args=(sim --trace "$trace" --strategy heuristic-overbook --pof-max "${POF_MAX:-0.1}" --runs "$runs" --jobs "$jobs")
    [ "$fixed" != none ] && args+=(--fixed-reservations "$fixed")
    out=$("$bin" "${args[@]}")
    ho=$(echo "$out" | awk '$1=="heuristic-overbook"{print $9" ± "$10}')
    hp=$(echo "$out" | awk '$1=="heuristic-plan"{print $9" ± "$10}')
    diff=$(echo "$out" | sed -n 's/^paired gain difference [^:]*: \(.*\) per run.*/\1/p')
    add=$(echo "$out" | sed -n 's/.*additional gain \(.*\)$/\1/p')
    echo "| $trace | $runs | $fixed | $hp | $ho | $diff | $add |"
  done
done
