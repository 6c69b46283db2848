#!/usr/bin/env bash
# slurm-down.sh stops the local Slurm that slurm-up.sh started: it cancels
# every job first (killing slurmd leaves running jobs alive), then stops the
# slurmds and slurmctld. munged is left running (other tools may use it);
# pass --munge to stop it too. Idempotent.
set -euo pipefail

dir=${FEDSCHED_SLURM_DIR:-/tmp/fedsched-slurm}
export SLURM_CONF=$dir/slurm.conf

say() { echo "slurm-down: $*" >&2; }
running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if [ -f "$SLURM_CONF" ] && running "$dir/slurmctld.pid"; then
  scancel --full --quiet --partition=fedsched 2>/dev/null || true
  scancel --full --quiet --user=root 2>/dev/null || true
  # Wait (briefly) for the jobs to leave the nodes.
  for _ in $(seq 100); do
    [ -z "$(squeue -h -t RUNNING,COMPLETING,PENDING,CONFIGURING -o %i 2>/dev/null)" ] && break
    scancel --full --quiet $(squeue -h -o %i 2>/dev/null) 2>/dev/null || true
    sleep 0.1
  done
fi

stop() { # pidfile name
  if running "$1"; then
    local pid; pid=$(cat "$1")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
    say "stopped $2 ($pid)"
  fi
  rm -f "$1"
}
# The slurmds stop in parallel (each takes a moment to say goodbye).
for f in "$dir"/slurmd-*.pid; do
  [ -e "$f" ] || continue
  n=$(basename "$f" .pid); stop "$f" "${n}" &
done
wait
stop "$dir/slurmctld.pid" slurmctld

if [ "${1:-}" = --munge ] && [ -f /run/munge/munged.pid ]; then
  stop /run/munge/munged.pid munged
fi
