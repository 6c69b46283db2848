#!/bin/sh
# The gossip-key rotation of docs/security.md, live: three real fedsched
# nodes with mutual TLS and encrypted gossip, each restarted at every step
# (the seed too); after each restart the restarted site must see all three
# sites alive. Then a fourth site with only the old key must never join.
# Leaves nothing running; exits non-zero if a step fails.
#
#   scripts/gossip-key-rotation.sh [WORKDIR]     (default: a new temp dir)
set -eu
W=${1:-$(mktemp -d)}
BIN=$W/fedsched
go build -o "$BIN" ./cmd/fedsched
P=$W/pki
"$BIN" tls ca create --dir "$P" >/dev/null
for s in a b c d; do "$BIN" tls cert create --dir "$P" --site $s >/dev/null; done
"$BIN" tls cert create --dir "$P" --operator ops >/dev/null
"$BIN" tls gossip-key --out "$W/old.key" >/dev/null
"$BIN" tls gossip-key --out "$W/new.key" >/dev/null
old=$(cat "$W/old.key")
new=$(cat "$W/new.key")

pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
ports() { case $1 in a) echo "17171 17946";; b) echo "17172 17947";; c) echo "17173 17948";; d) echo "17174 17949";; esac; }
start() { # name keyfile
	set -- "$1" "$2" $(ports "$1")
	# Every site names the others as seeds, the first site too: a restarted
	# site rejoins through its seeds (see docs/security.md, Rotation).
	join=$(for o in a b c; do [ "$o" != "$1" ] && echo "127.0.0.1:$(ports $o | cut -d' ' -f2)"; done | paste -sd, -)
	"$BIN" node --site "$1" --procs 4 --data "$W/$1" --listen 127.0.0.1:"$3" --gossip 127.0.0.1:"$4" --join "$join" \
		--executor simulated --tls-ca "$P/ca.pem" --tls-cert "$P/site-$1.pem" --tls-key "$P/site-$1-key.pem" \
		--gossip-key "$2" 2>>"$W/$1.log" &
	echo $! >"$W/$1.pid"
	pids="$pids $!"
}
stop() { p=$(cat "$W/$1.pid"); kill "$p"; while kill -0 "$p" 2>/dev/null; do sleep 0.05; done; }
alive() { # how many sites site $1 sees alive
	set -- $(ports "$1")
	"$BIN" peers --addr 127.0.0.1:"$1" --tls-ca "$P/ca.pem" --tls-cert "$P/operator-ops.pem" --tls-key "$P/operator-ops-key.pem" --timeout 2s 2>/dev/null | grep -c ' alive ' || true
}
wait3() { # site $1 must see 3 sites alive within 10 s
	t0=$(date +%s.%N)
	for _ in $(seq 100); do
		if [ "$(alive "$1")" -ge 3 ]; then
			echo "  $1 restarted: 3 sites alive after $(echo "$(date +%s.%N) - $t0" | bc | cut -c1-4) s"
			return 0
		fi
		sleep 0.1
	done
	echo "  $1 restarted: only $(alive "$1") sites alive after 10 s" >&2
	exit 1
}
keys() { # write site files with the given lines
	for s in a b c; do printf '%s\n' "$@" >"$W/$s.key"; chmod 600 "$W/$s.key"; done
}
keys "$old"
for s in a b c; do start $s "$W/$s.key"; done
for s in a b c; do wait3 $s >/dev/null; done
step() { # title, then the key lines
	echo "== $1"
	shift
	keys "$@"
	for s in a b c; do stop $s; start $s "$W/$s.key"; wait3 $s; done
}
step "1. add the new key (the old one still encrypts)" "$old" "$new"
step "2. the new key encrypts (the old one still accepted)" "$new" "$old"
step "3. drop the old key" "$new"
echo "== a site with only the old key never joins"
start d "$W/old.key"
sleep 5
n=$(alive a)
echo "  site a sees $n sites alive (want 3); site a's log: $(grep -c 'no installed keys could decrypt' "$W/a.log") messages it could not decrypt"
[ "$n" -eq 3 ]
echo "ok (logs: $W/*.log)"
