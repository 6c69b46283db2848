#!/usr/bin/env bash
# slurm-federation.sh runs a two-site federation on this host: site "hpc"
# in front of the local Slurm (scripts/slurm-up.sh) and site "lab" running
# processes. It submits a job script with #FEDSCHED directives to lab,
# which is too small for it and delegates it to hpc, where Slurm runs it;
# then a job that hpc cannot take in time goes the other way. It prints
# every command and its real output (docs/operations.md shows one run),
# and stops the two nodes at the end. Run it as root from the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
SLURM_CONF=${SLURM_CONF:-$(scripts/slurm-up.sh | tail -1)}
export SLURM_CONF
work=$(mktemp -d /tmp/fedsched-slurm-federation.XXXXXX)
go build -o "$work/fedsched" ./cmd/fedsched
export PATH=$work:$PATH
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

show() { echo "\$ $*"; "$@"; echo; }

# --insecure: plaintext on loopback, for a demonstration on one host;
# --allow-root-jobs: the script runs as root, and so do its jobs.
fedsched node --site hpc --data "$work/hpc" --listen 127.0.0.1:17071 --insecure --allow-root-jobs --executor slurm --procs 8 \
  --gossip 127.0.0.1:17946 >"$work/hpc.log" 2>&1 & pids+=($!)
fedsched node --site lab --data "$work/lab" --listen 127.0.0.1:17072 --insecure --allow-root-jobs --executor process --procs 2 \
  --gossip 127.0.0.1:17947 --join 127.0.0.1:17946 >"$work/lab.log" 2>&1 & pids+=($!)
for _ in $(seq 100); do
  [ "$(fedsched peers --addr 127.0.0.1:17072 2>/dev/null | grep -c alive)" = 2 ] && break
  sleep 0.1
done

mkdir -p "$work/submit" && cd "$work/submit"
cat >job.sh <<'JOB'
#!/bin/sh
#FEDSCHED --procs 4 --estimate 2m
#FEDSCHED --app wave --env STEPS=3
# The #FEDSCHED lines above are this script's options.
echo "job $FEDSCHED_JOB_ID on $FEDSCHED_PROCS processors as $USER in $(pwd)"
for i in $(seq "$STEPS"); do echo "step $i of $STEPS"; sleep 1; done
echo "a warning" >&2
JOB
export FEDSCHED_ADDR=127.0.0.1:17072
show cat job.sh
show fedsched submit job.sh
show fedsched logs --follow lab.000000000001
show fedsched logs --stderr lab.000000000001
show squeue -t all -n hpc.000000000001 -o '%i %j %T %C %k'
show fedsched submit --procs 2 --estimate 1m --output 'wave-%j.out' job.sh
sleep 6
show ls
show cat wave-lab.000000000002.out
show fedsched jobs

# The other way: hpc is full for a minute, so an SLA job due in 30 s goes
# to lab, and hpc's user reads its output from there.
export FEDSCHED_ADDR=127.0.0.1:17071
filler=$(fedsched submit --procs 8 --estimate 1m -- sleep 60 | awk '$1 == "id" {print $2}')
cat >small.sh <<'JOB'
#!/bin/sh
#FEDSCHED --procs 1 --estimate 10s --deadline +30s --fee 1 --penalty 1
echo "small job $FEDSCHED_JOB_ID ran on $(hostname) as a process"
JOB
show fedsched submit small.sh
small=$(fedsched jobs | awk '$1 ~ /^hpc\./ {id = $1} END {print id}')
show fedsched logs --follow "$small"
fedsched cancel "$filler" >/dev/null
