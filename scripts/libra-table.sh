#!/usr/bin/env bash
# Yeo's time-shared baselines beside the overbooking strategies
# (docs/overbooking.md, "Yeo's time-shared baselines"): every SLA strategy
# of fedsched sim --strategy on the given traces, with this project's SLA
# terms and with Yeo's urgency classes, at the thesis's 200 % load; then
# Yeo's three at other loads. Prints two Markdown tables (means per run of
# the 20 runs of 1,000 jobs).
#
#   scripts/libra-table.sh                    # kth and sdsc: about 10 CPU-minutes
#   TRACES=kth LOADS="1 2" scripts/libra-table.sh
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
. scripts/fedsched-bin.sh
traces=${TRACES:-kth sdsc}
loads=${LOADS:-0.5 1 4}
for tr in $traces; do
  for u in none libra-sla; do
    for st in comprehensive-overbook heuristic-overbook libra-sla libra-riskd; do
      "$bin" sim --trace "$tr" --strategy "$st" --urgency "$u" --json "$dir/$tr-$u-$st-2.json" >/dev/null
    done
    for l in $loads; do
      for st in libra-sla libra-riskd; do
        "$bin" sim --trace "$tr" --strategy "$st" --urgency "$u" --load "$l" --json "$dir/$tr-$u-$st-$l.json" >/dev/null
      done
    done
  done
done

python3 - "$dir" "$traces" "$loads" <<'PY'
import json, sys
d, traces, loads = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def sla(tr, u, st, l):
    return json.load(open(f"{d}/{tr}-{u}-{st}-{l}.json"))["sites"][0]["sla"]
def awrt(x):
    return sum(m["awrt_s"] for m in x["run_metrics"]) / len(x["run_metrics"])
print("| trace | SLA terms (`--urgency`) | strategy | accepted | overbooked | met | violated | gain / run (± 95 % CI) | reliability | profitability | Yeo's utility / run | AWRT (s) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for tr in traces:
    for u in ["none", "libra-sla"]:
        seen = set()
        for st in ["comprehensive-overbook", "heuristic-overbook", "libra-sla", "libra-riskd"]:
            s = sla(tr, u, st, 2)
            for x in [s.get("baseline"), s]:
                if x is None or x["strategy"] in seen:
                    continue
                seen.add(x["strategy"])
                ut = f"{x['utility']:,.0f}" if "utility" in x else "—"
                print(f"| {tr.upper()} | {u} | {x['strategy']} | {x['accepted']:.1f} | {x['overbooked']:.1f} | {x['met']:.1f} | {x['violated']:.1f} | "
                      f"{x['gain']:,.0f} ± {x['gain_ci95']:,.0f} | {x['reliability']:.3f} | {x['profitability']:.3f} | {ut} | {awrt(x):,.0f} |")
print()
print("| trace | SLA terms | load | libra: accepted, gain | libra-sla: accepted, violated, gain, vs libra (paired, 95 % CI) | libra-riskd: accepted, gain, vs libra |")
print("|---|---|---|---|---|---|")
for tr in traces:
    for u in ["none", "libra-sla"]:
        for l in sorted(loads + ["2"], key=float):
            a, b = sla(tr, u, "libra-sla", l), sla(tr, u, "libra-riskd", l)
            z = a["baseline"]
            print(f"| {tr.upper()} | {u} | {float(l):.0%} | {z['accepted']:.1f}, {z['gain']:,.0f} | "
                  f"{a['accepted']:.1f}, {a['violated']:.1f}, {a['gain']:,.0f}, {a['gain_diff']:+,.0f} ± {a['gain_diff_ci95']:,.0f} | "
                  f"{b['accepted']:.1f}, {b['gain']:,.0f}, {b['gain_diff']:+,.0f} ± {b['gain_diff_ci95']:,.0f} |")
PY
