#!/usr/bin/env bash
# Takes the screenshot of the status page in docs/figures/status-page.png:
# two federated sites on loopback (alpha: 32 processors, overbooking;
# beta: 16), a few jobs, a maintenance window, one job delegated from alpha
# to beta, then headless chromium photographs alpha's page.
#   scripts/status-screenshot.sh [OUT.png]
# Needs chromium (apt-get install -y chromium). Stops its nodes on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/figures/status-page.png}
tmp=$(mktemp -d)
go build -o "$tmp/fedsched" ./cmd/fedsched
f="$tmp/fedsched"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
A=127.0.0.1:$(port); AH=127.0.0.1:$(port); AG=127.0.0.1:$(port)
B=127.0.0.1:$(port); BG=127.0.0.1:$(port)
"$f" node --insecure --site alpha --data "$tmp/a" --listen "$A" --http "$AH" --gossip "$AG" --executor simulated --procs 32 \
  --overbooking-enabled --overbooking-pof-max 0.5 >"$tmp/a.log" 2>&1 & pids+=($!)
"$f" node --insecure --site beta --data "$tmp/b" --listen "$B" --gossip "$BG" --join "$AG" --executor simulated --procs 16 >"$tmp/b.log" 2>&1 & pids+=($!)
for _ in $(seq 100); do "$f" peers --addr "$A" 2>/dev/null | grep -q beta && break; sleep 0.2; done
at() { date -u -d "$1" +%Y-%m-%dT%H:%M:%SZ; }
sub() { "$f" submit --addr "$A" "$@" -- sleep 1 >/dev/null; }
sub --procs 12 --estimate 40m --user alice
sub --procs 8 --estimate 25m --user bob
sub --procs 10 --estimate 70m --user carol
sub --procs 16 --estimate 30m --user alice
sub --procs 24 --estimate 50m --user dave
"$f" reserve --addr "$A" --procs 32 --start "$(at '+150 min')" --end "$(at '+170 min')" --name maintenance >/dev/null
sub --procs 20 --estimate 40m --user erin
sub --procs 4 --estimate 20m --user bob --release +90m
# Due in 30 minutes: alpha has no slot; beta has.
sub --procs 12 --estimate 20m --user frank --deadline +30m --fee 10 --penalty 5
"$f" jobs --addr "$A" --all
chromium --headless --no-sandbox --disable-gpu --disable-background-networking --no-first-run --disable-component-update \
  --disable-sync --user-data-dir="$tmp/chrome" --hide-scrollbars --window-size=1366,1400 --screenshot="$out" "http://$AH/" 2>/dev/null
echo "wrote $out"
