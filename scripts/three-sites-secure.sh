#!/bin/sh
# Three real fedsched nodes on this machine with mutual TLS and encrypted
# gossip (docs/security.md): a throwaway CA, a certificate per site, an
# operator and a user, a gossip key; the nodes on loopback ports; then the
# CLI as the operator, as the user, and as a stranger whose certificate
# comes from another CA. Leaves nothing running.
#
#   scripts/three-sites-secure.sh [WORKDIR]     (default: a new temp dir)
set -eu
W=${1:-$(mktemp -d)}
BIN=$W/fedsched
go build -o "$BIN" ./cmd/fedsched
P=$W/pki
"$BIN" tls ca create --dir "$P"
for s in a b c; do "$BIN" tls cert create --dir "$P" --site $s; done
"$BIN" tls cert create --dir "$P" --operator ops
"$BIN" tls cert create --dir "$P" --user alice
"$BIN" tls cert create --dir "$P" --user bob
"$BIN" tls gossip-key --out "$P/gossip.key"
"$BIN" tls ca create --dir "$W/other"
"$BIN" tls cert create --dir "$W/other" --operator mallory

pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
node() { # name procs api gossip [join]
	join=""
	[ -n "${5:-}" ] && join="--join $5"
	# shellcheck disable=SC2086 # $join is empty or two words
	"$BIN" node --site "$1" --procs "$2" --data "$W/$1" --listen "$3" --gossip "$4" $join \
		--executor simulated --tls-ca "$P/ca.pem" --tls-cert "$P/site-$1.pem" --tls-key "$P/site-$1-key.pem" \
		--gossip-key "$P/gossip.key" 2>"$W/$1.log" &
	pids="$pids $!"
}
node a 2 127.0.0.1:17071 127.0.0.1:17946
node b 8 127.0.0.1:17072 127.0.0.1:17947 127.0.0.1:17946
node c 8 127.0.0.1:17073 127.0.0.1:17948 127.0.0.1:17946
as() { who=$1; shift; cmd=$1; shift; "$BIN" "$cmd" --addr 127.0.0.1:17071 --tls-ca "$P/ca.pem" --tls-cert "$P/$who.pem" --tls-key "$P/$who-key.pem" "$@"; }
for i in $(seq 50); do as operator-ops peers >/dev/null 2>&1 && [ "$(as operator-ops peers | grep -c alive)" -ge 3 ] && break; sleep 0.2; done
echo "== peers, as the operator"; as operator-ops peers
echo "== alice submits a job wider than site a (delegated)"; as user-alice submit --procs 4 --estimate 1h --json -- true | grep -E '"(id|state|site|user)"'
echo "== bob submits"; bid=$(as user-bob submit --procs 1 --estimate 1h --json -- true | sed -n 's/.*"id": "\(.*\)".*/\1/p' | head -1); echo "$bid"
echo "== alice lists: only her jobs"; as user-alice jobs
echo "== alice tries to cancel bob's job"; as user-alice cancel "$bid" || true
echo "== alice tries to submit as bob"; as user-alice submit --user bob --procs 1 --estimate 1m -- true || true
echo "== a stranger with another CA's certificate"; "$BIN" jobs --addr 127.0.0.1:17071 --tls-ca "$P/ca.pem" --tls-cert "$W/other/operator-mallory.pem" --tls-key "$W/other/operator-mallory-key.pem" --timeout 3s || true
echo "== plaintext"; "$BIN" jobs --addr 127.0.0.1:17071 --timeout 3s || true
echo "== the operator cancels bob's job"; as operator-ops cancel "$bid"
echo "== a node without certificates refuses to federate"; "$BIN" node --site d --data "$W/d" --gossip 127.0.0.1:17949 --executor simulated || true
echo "== logs: $W/{a,b,c}.log"
