#!/bin/sh
# bench-instructions.sh TESTBINARY BENCH N: instructions per iteration of a
# Go benchmark, from callgrind runs of N and of 2N iterations (both run the
# benchmark's setup twice, once for b.N=1 and once for b.N=N, so it cancels).
# Instruction counts do not depend on what else runs on the machine.
#   go test -c -o /tmp/plan.test ./plan/
#   scripts/bench-instructions.sh /tmp/plan.test 'EarliestFit/load=1.0$' 1000
set -eu
b=$1 bench=$2 n=$3
ir() {
	GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		"$b" -test.run XXX -test.bench "$bench" -test.benchtime "${1}x" 2>&1 | sed -n 's/.*Collected : //p'
}
a=$(ir "$n")
c=$(ir $((2 * n)))
echo "$bench $(( (c - a) / n )) instructions/op"
