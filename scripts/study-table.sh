#!/usr/bin/env bash
# The federation study's three-site comparison (Papaspyrou 2013, Tables 7.2
# and 7.3) beside ours, end to end: experiments/study-table.yaml holds the
# setups and the study's published figures; this runs it and prints the
# markdown table of docs/study.md (and writes the tidy CSV to study-table.csv
# in the current directory, or to $1).
#
#   scripts/study-table.sh [OUT.csv]
set -euo pipefail
out=$(realpath -m "${1:-study-table.csv}")
cd "$(dirname "$0")/.."
go run ./cmd/fedsched sim --experiment experiments/study-table.yaml --csv "$out"
