#!/usr/bin/env bash
# The federation study's setup f14 (KTH96 and CTC96; digest §2.5, §6.2):
# EFS with the rule bases trained on the training slice (each trace's first
# 150 days; efs-retrained: CTC96's retrained against KTH96's), against ACF
# and RQF, on the training slice and on the
# verification slice (the 183 days after it). ACF and RQF run EASY, as in
# the study's comparison, and FCFS, as EFS does. Prints a Markdown table:
# per site, the AWRT alone under the run's own policy and federated, the
# AWRT change against the site alone under its own policy and against the
# site alone under FCFS (§6.2's reference), and the utilisation change.
# Needs python3.
#
#   scripts/study-f14.sh
#   FEDSCHED=/path/to/fedsched scripts/study-f14.sh
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
. scripts/fedsched-bin.sh

for slice in train- ""; do
  for tr in efs efs-retrained acf-fcfs rqf-fcfs acf rqf; do
    f=f14-$slice$tr
    "$bin" sim --scenario "scenarios/study/$f.yaml" --json "$dir/$f.json" >/dev/null
  done
done

python3 - "$dir" <<'EOF'
import json, sys
d = sys.argv[1]
print("| slice | run | local policy | site | AWRT alone (s) | AWRT federated (s) | change vs alone, same policy | change vs alone under FCFS | utilisation change |")
print("|---|---|---|---|---|---|---|---|---|")
for slice, name in (("train-", "training (150 d)"), ("", "verification (183 d)")):
    fcfs = {s["name"]: s["alone"]["awrt_s"] for s in json.load(open(f"{d}/f14-{slice}efs.json"))["sites"]}
    for tr in ("efs", "efs-retrained", "acf-fcfs", "rqf-fcfs", "acf", "rqf"):
        r = json.load(open(f"{d}/f14-{slice}{tr}.json"))
        for s in r["sites"]:
            a, f = s["alone"]["awrt_s"], s["federated"]["awrt_s"]
            du = (s["utilization_federated"] - s["utilization_alone"]) / s["utilization_alone"]
            print(f"| {name} | {tr.removesuffix('-fcfs')} | {s['policy']} | {s['name']} | {a:.0f} | {f:.0f} | "
                  f"{100 * (a - f) / a:+.2f} % | {100 * (fcfs[s['name']] - f) / fcfs[s['name']]:+.2f} % | {100 * du:+.2f} % |")
EOF
