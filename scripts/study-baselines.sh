#!/usr/bin/env bash
# Single-site baselines of the federation study (digest §4.4, the thesis's
# Tables 3.3-3.5): each of its three-site traces replayed alone under FCFS,
# EASY and LIST at the study's site size, sanitised with the study's five
# rules (rule 4: clip). KTH96 and CTC96 are whole (333 and 339 days);
# SDSC00 is cut to KTH96's length, 333 days (the study's SDSC00₁₁).
# Prints a Markdown table: AWRT per policy and EASY's utilisation.
#
#   scripts/study-baselines.sh            # all three traces
#   FEDSCHED=/path/to/fedsched scripts/study-baselines.sh
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
. scripts/fedsched-bin.sh

# name, embedded trace, site size in the study, span (- for the whole log)
sites="KTH96 kth 100 -
CTC96 ctc 430 -
SDSC00₁₁ sdsc 128 333d"

# field prints one numeric key of the (single-site) JSON report.
field() { sed -n "s/^ *\"$1\": \([0-9.e+-]*\),\{0,1\}$/\1/p" | head -n 1; }

echo "| trace | procs | jobs | FCFS AWRT (s) | EASY AWRT (s) | LIST AWRT (s) | EASY utilisation |"
echo "|---|---|---|---|---|---|---|"
while read -r name trace procs span; do
  cut=(); [ "$span" = - ] || cut=(--span "$span")
  row="| $name | $procs"
  for pol in fcfs easy list; do
    out=$("$bin" sim --trace "$trace" --procs "$procs" --sanitize "${cut[@]}" --policy "$pol" --json - 2>/dev/null)
    jobs=$(field jobs <<<"$out")
    awrt=$(field awrt_s <<<"$out")
    [ "$pol" = fcfs ] && row="$row | $jobs"
    row="$row | $(printf '%.0f' "$awrt")"
    [ "$pol" = easy ] && util=$(field utilization <<<"$out")
  done
  echo "$row | $(awk -v u="$util" 'BEGIN{printf "%.2f %%", 100*u}') |"
done <<<"$sites"
