#!/usr/bin/env bash
# How max_candidates trades messages for quality (docs/simulation.md): a
# 145-site grid proxy (scripts/gridproxy: 188,000 single-processor jobs
# over 11 days, one shared clock, EASY and ACF at every site) replayed
# with 1, 2, 3, 5, 10 and all 144 peers asked per offer. Prints a Markdown
# table: messages sent, quote requests, jobs offered, kept at home, kept
# although a peer not asked could have started them at once, delegated,
# the AWRT over all jobs (federated and alone) and how many sites gain.
#
#   scripts/max-candidates.sh                  # about 20 CPU-minutes on 2 cores
#   FEDSCHED=/path/to/fedsched MC="1 3" scripts/max-candidates.sh
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
. scripts/fedsched-bin.sh
go run ./scripts/gridproxy -out "$dir/grid" -sites 145 2>/dev/null

for mc in ${MC:-1 2 3 5 10 144}; do
  sed "s/^max_candidates: 3/max_candidates: $mc/" "$dir/grid/grid145.yaml" > "$dir/grid/mc$mc.yaml"
  "$bin" sim --scenario "$dir/grid/mc$mc.yaml" --json "$dir/mc$mc.json" >/dev/null
done

python3 - "$dir" ${MC:-1 2 3 5 10 144} <<'PY'
import json, sys
d, mcs = sys.argv[1], sys.argv[2:]
print("| max_candidates | messages | quote requests | jobs offered | kept at home | kept, startable at once by a peer not asked | delegated | AWRT, all jobs (s) | AWRT alone (s) | sites better / worse than alone |")
print("|---|---|---|---|---|---|---|---|---|---|")
def awrt(sites, k):
    return sum(s[k]["awrt_s"] * s[k]["squashed_area"] for s in sites) / sum(s[k]["squashed_area"] for s in sites)
for mc in mcs:
    r = json.load(open(f"{d}/mc{mc}.json"))
    t, s = r["totals"], r["sites"]
    name = f"all ({len(s) - 1})" if int(mc) >= len(s) - 1 else mc
    better = sum(x["awrt_change"] > 0 for x in s)
    worse = sum(x["awrt_change"] < 0 for x in s)
    print(f"| {name} | {t['messages']:,.0f} | {t['messages_by_kind'].get('quote_request', 0):,.0f} | {t['offered']:,.0f} | {t['kept']:,.0f} "
          f"| {t['kept_startable_unasked']:,.0f} | {t['delegated']:,.0f} | {awrt(s, 'federated'):,.0f} | {awrt(s, 'alone'):,.0f} | {better} / {worse} |")
PY
