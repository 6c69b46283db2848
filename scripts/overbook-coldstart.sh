#!/bin/sh
# Overbooking from a cold start on KTH (docs/overbooking.md): 20 runs of the
# first 200 jobs a site sees, from trained statistics and from none, and
# with the minimum sample count lowered to 1 (the behaviour before it
# existed). Prints one line per configuration: mean overbooked and violated
# jobs per run, and the paired gain difference against heuristic planning.
# Usage: scripts/overbook-coldstart.sh [fedsched binary]
set -eu
bin=${1:-go run ./cmd/fedsched}
for strategy in heuristic-overbook comprehensive-overbook; do
	for pof in 0.1 0.3; do
		for cfg in "--train-jobs all --learn static" "--train-jobs all --learn online" \
			"--train-jobs none --learn online" "--train-jobs none --learn online --min-samples 1"; do
			printf '%-22s pof<%s %-52s ' "$strategy" "$pof" "$cfg"
			# shellcheck disable=SC2086 # $cfg and $bin are word lists
			$bin sim --trace kth --strategy "$strategy" --pof-max "$pof" --runs 20 --jobs 200 $cfg |
				awk -v s="$strategy" '$1 == s { ob = $4; vi = $6 } /paired gain difference/ { d = $7 " ± " $9 " (" $(NF-1) " %)" }
					END { printf "overbooked %5.1f  violated %5.2f  gain vs baseline %s\n", ob, vi, d }'
		done
	done
done
