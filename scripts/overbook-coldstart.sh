#!/bin/sh
# Overbooking from a cold start on KTH (docs/overbooking.md): 40 runs of the
# first 200 jobs a site sees, from statistics trained on every earlier job
# and from none. Part 1 compares trained statistics (static, online) with
# none at the default minimum sample count; part 2 sweeps --min-samples
# from a cold start. One line per configuration: mean overbooked and
# violated jobs per run, and the gain.
# Usage: scripts/overbook-coldstart.sh [fedsched binary]
set -eu
bin=${1:-go run ./cmd/fedsched}
run() { # strategy pof flags...
	s=$1 p=$2
	shift 2
	printf '%-22s pof<%s %-50s ' "$s" "$p" "$*"
	$bin sim --trace kth --strategy "$s" --pof-max "$p" --runs 40 --jobs 200 "$@" |
		awk -v s="$s" '$1 == s { printf "overbooked %5.1f  violated %5.2f  gain %s\n", $4, $6, $9 }'
}
for s in heuristic-overbook comprehensive-overbook; do
	for p in 0.1 0.3; do
		run "$s" "$p" --train-jobs all --learn static
		run "$s" "$p" --train-jobs all --learn online
		run "$s" "$p" --train-jobs none --learn online
	done
done
for s in heuristic-overbook comprehensive-overbook; do
	for p in 0.1 0.3; do
		for m in 1 30 50 75 100; do
			run "$s" "$p" --train-jobs none --learn online --min-samples "$m"
		done
	done
done
