#!/bin/sh
# The rotations of docs/security.md, live: three real fedsched nodes with
# mutual TLS and encrypted gossip, each restarted at every step (the first
# site too); after each restart the restarted site must see all three
# sites alive. First the gossip key (then a fourth site with only the old
# key must never join), then the CA (then a certificate of the old CA must
# be refused, one of the new accepted).
# Leaves nothing running; exits non-zero if a step fails.
#
#   scripts/rotation.sh [WORKDIR]     (default: a new temp dir)
set -eu
W=${1:-$(mktemp -d)}
BIN=$W/fedsched
go build -o "$BIN" ./cmd/fedsched
P=$W/pki
"$BIN" tls ca create --dir "$P" >/dev/null
for s in a b c d; do "$BIN" tls cert create --dir "$P" --site $s >/dev/null; done
"$BIN" tls cert create --dir "$P" --operator ops >/dev/null
# Each site's installed files: its CA bundle, certificate and key.
install() { # site pkidir
	mkdir -p "$W/tls-$1"
	cp "$2/site-$1.pem" "$W/tls-$1/cert.pem"
	cp "$2/site-$1-key.pem" "$W/tls-$1/key.pem"
}
for s in a b c d; do install $s "$P"; cp "$P/ca.pem" "$W/tls-$s/ca.pem"; done
OPS=$P
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
	procs=8
	[ "$1" = a ] && procs=2
	"$BIN" node --site "$1" --procs $procs --data "$W/$1" --listen 127.0.0.1:"$3" --gossip 127.0.0.1:"$4" --join "$join" \
		--executor simulated --tls-ca "$W/tls-$1/ca.pem" --tls-cert "$W/tls-$1/cert.pem" --tls-key "$W/tls-$1/key.pem" \
		--gossip-key "$2" 2>>"$W/$1.log" &
	echo $! >"$W/$1.pid"
	pids="$pids $!"
}
stop() { p=$(cat "$W/$1.pid"); kill "$p"; while kill -0 "$p" 2>/dev/null; do sleep 0.05; done; }
alive() { # how many sites site $1 sees alive, asked by the operator of $OPS
	set -- $(ports "$1")
	"$BIN" peers --addr 127.0.0.1:"$1" --tls-ca "$OPS/ca.pem" --tls-cert "$OPS/operator-ops.pem" --tls-key "$OPS/operator-ops-key.pem" --timeout 2s 2>/dev/null | grep -c ' alive ' || true
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
delegate() { # a job too wide for site a must be delegated to b or c over mutual TLS
	out=$("$BIN" submit --addr 127.0.0.1:17171 --tls-ca "$OPS/ca.pem" --tls-cert "$OPS/operator-ops.pem" --tls-key "$OPS/operator-ops-key.pem" \
		--json --procs 4 --estimate 1m -- true 2>&1)
	if ! echo "$out" | grep -q '"state": "DELEGATED"'; then echo "  not delegated: $out" >&2; exit 1; fi
	echo "  a job too wide for a: delegated to $(echo "$out" | sed -n 's/^  "site": "\(.*\)",/\1/p')"
}
restartAll() { for s in a b c; do stop $s; start $s "$W/$s.key"; wait3 $s; delegate; done; }
step() { # title, then the key lines
	echo "== $1"
	shift
	keys "$@"
	restartAll
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
stop d

Q=$W/pki2
"$BIN" tls ca create --dir "$Q" >/dev/null
for s in a b c; do "$BIN" tls cert create --dir "$Q" --site $s >/dev/null; done
"$BIN" tls cert create --dir "$Q" --operator ops >/dev/null
echo "== CA 1. every site trusts the old and the new CA"
for s in a b c; do cat "$P/ca.pem" "$Q/ca.pem" >"$W/tls-$s/ca.pem"; done
restartAll
echo "== CA 2. every site gets its certificate of the new CA (the operator's too)"
for s in a b c; do install $s "$Q"; done
OPS=$Q
restartAll
echo "== CA 3. every site drops the old CA"
for s in a b c; do cp "$Q/ca.pem" "$W/tls-$s/ca.pem"; done
restartAll
old_ok=$("$BIN" peers --addr 127.0.0.1:17171 --tls-ca "$Q/ca.pem" --tls-cert "$P/operator-ops.pem" --tls-key "$P/operator-ops-key.pem" --timeout 2s 2>&1 | head -1 || true)
echo "  the operator's certificate of the old CA: $old_ok"
echo "$old_ok" | grep -q alive && exit 1
echo "ok (logs: $W/*.log)"
