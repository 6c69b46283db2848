#!/usr/bin/env bash
# The federation study's three-site comparison (Papaspyrou 2013, Tables 7.2
# and 7.3) beside ours: each site's AWRT improvement and utilisation change
# (relative, %) against the site alone under EASY, for the study's setups
# whose traces are in the repository. The study's figures are its published
# ones (docs/study.md); ours come from replaying scenarios/study/*.yaml.
#
#   scripts/study-table.sh                 # every setup below
#   scripts/study-table.sh f3-p-easy       # one setup
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${FEDSCHED:-}
if [ -z "$bin" ]; then
  dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
  go build -o "$dir/fedsched" ./cmd/fedsched
  bin=$dir/fedsched
fi

# setup, then the study's AWRT improvement and U change for KTH96, CTC96,
# SDSC00 (Table 7.2, Table 7.3).
study="f3-p-easy 24.39 1.33 37.74 -7.72 -4.53 -8.11
f9-shaking-g 29.26 19.74 33.30 -13.70 2.74 -17.73
f11-rqf 25.36 4.69 38.69 -9.51 6.13 -11.25
f11-acf 19.84 2.08 35.26 -10.51 5.51 -8.95"

want=("$@")
echo "| setup | site | AWRT improvement: study | ours | difference (pp) | utilisation change: study | ours | difference (pp) |"
echo "|---|---|---|---|---|---|---|---|"
while read -r setup a1 a2 a3 u1 u2 u3; do
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " =~ " $setup " ]]; then continue; fi
  "$bin" sim --scenario "scenarios/study/$setup.yaml" --json - 2>/dev/null |
    awk -v setup="$setup" -v a="$a1 $a2 $a3" -v u="$u1 $u2 $u3" '
      BEGIN { split(a, sa, " "); split(u, su, " ") }
      /^      "name":/ { gsub(/[",]/, "", $2); name = $2; k++ }
      /"awrt_change":/ { gsub(/,/, "", $2); ac = 100 * $2 }
      /"utilization_alone":/ { gsub(/,/, "", $2); ua = $2 }
      /"utilization_federated":/ { gsub(/,/, "", $2); uc = 100 * ($2 - ua) / ua
        printf "| %s | %s | %+.2f | %+.2f | %+.2f | %+.2f | %+.2f | %+.2f |\n", setup, name, sa[k], ac, ac - sa[k], su[k], uc, uc - su[k] }'
done <<<"$study"
