#!/bin/sh
# proto/check.sh: fail if the committed generated protobuf code is not what
# `make proto` produces from the committed .proto files.
#
# It regenerates every file into a temporary directory (never touching the
# work tree) and diffs it against the committed copy. CI needs the same
# protoc as the Makefile pins:
#   apt-get update && apt-get install -y protobuf-compiler libprotobuf-dev
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

make -C "$root" --no-print-directory proto GEN_OUT="$tmp"

status=0
count=0
for gen in $(cd "$tmp" && find . -name '*.pb.go' | sort); do
	count=$((count + 1))
	if [ ! -f "$root/$gen" ]; then
		echo "proto-check: $gen is generated but not committed" >&2
		status=1
	elif ! diff -u "$root/$gen" "$tmp/$gen"; then
		echo "proto-check: $gen is stale; run 'make proto'" >&2
		status=1
	fi
done
# A committed generated file whose .proto is gone is stale too.
for gen in $(cd "$root" && find proto node -name '*.pb.go' | sort); do
	if [ ! -f "$tmp/$gen" ]; then
		echo "proto-check: $gen is committed but no .proto generates it" >&2
		status=1
	fi
done
if [ "$count" -eq 0 ]; then
	echo "proto-check: nothing was generated" >&2
	exit 1
fi
[ "$status" -eq 0 ] && echo "proto-check: $count generated files up to date"
exit "$status"
