#!/usr/bin/env bash
# slurm-up.sh starts a local Slurm for fedsched's Slurm executor: munged,
# one slurmctld and several slurmd as virtual nodes on this host, with a
# partition dedicated to fedsched. It installs Debian's slurm-wlm and munge
# when they are missing. Run it as root (CI and developers' containers);
# it is idempotent: running it again on a running Slurm only waits for it.
#
# It prints the slurm.conf path on its last line; use it as
#
#   export SLURM_CONF=$(scripts/slurm-up.sh | tail -1)
#
# Settings (environment):
#   FEDSCHED_SLURM_DIR   where slurm.conf, state, spool and logs live
#                        (default /tmp/fedsched-slurm)
#   FEDSCHED_SLURM_PORT  slurmctld's port; the slurmds use the next ones
#                        (default 16817)
#   FEDSCHED_SLURM_NODES number of virtual nodes (default 4)
#   FEDSCHED_SLURM_CPUS  CPUs each virtual node declares (default 4; more
#                        than the host has is allowed: config_overrides)
#
# scripts/slurm-down.sh cancels the jobs and stops the daemons.
set -euo pipefail

dir=${FEDSCHED_SLURM_DIR:-/tmp/fedsched-slurm}
port=${FEDSCHED_SLURM_PORT:-16817}
nodes=${FEDSCHED_SLURM_NODES:-4}
cpus=${FEDSCHED_SLURM_CPUS:-4}
conf=$dir/slurm.conf
export SLURM_CONF=$conf

say() { echo "slurm-up: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
  say "must run as root (slurmd switches to the jobs' users)"; exit 1
fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
  say "installing slurm-wlm and munge"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >&2
fi

# munge: a 0600 key owned by munge, a socket directory anyone can search
# (every client command talks to munged).
install -d -o munge -g munge -m 0700 /etc/munge
if [ ! -s /etc/munge/munge.key ]; then
  mungekey -c -f -k /etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key
chmod 0600 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge /var/lib/munge /var/log/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  say "starting munged"
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n | unmunge >/dev/null
fi

mkdir -p "$dir/state" "$dir/log" "$dir/spool"
tmp=$(mktemp "$dir/.slurm.conf.XXXXXX")
{
  cat <<EOF
# Written by scripts/slurm-up.sh: a local Slurm dedicated to fedsched.
ClusterName=fedsched
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# sacct -c reads finished jobs from here (no slurmdbd).
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
# fedsched is the planner: Slurm must start what it is given at once, so
# its scheduling loops run every second (the defaults wait 30-60 s) ...
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=1
# ... and refuses at submission what no partition can ever run (instead of
# leaving it pending for ever).
EnforcePartLimits=ALL
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# Virtual nodes may declare more CPUs than the host has.
SlurmdParameters=config_overrides
# A drained or lost node comes back by itself once its slurmd is back.
ReturnToService=2
SlurmdTimeout=20
KillWait=5
MinJobAge=300
InactiveLimit=0
EOF
  names=()
  for i in $(seq "$nodes"); do
    echo "NodeName=n$i NodeHostname=localhost Port=$((port + i)) CPUs=$cpus State=UNKNOWN"
    names+=("n$i")
  done
  echo "PartitionName=fedsched Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE OverSubscribe=NO State=UP"
} >"$tmp"
if [ -f "$conf" ] && cmp -s "$tmp" "$conf"; then
  rm -f "$tmp"
else
  if [ -f "$conf" ] && [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
    say "slurm.conf changed: restarting the daemons"
    "$(dirname "$0")/slurm-down.sh" >&2
  fi
  mv "$tmp" "$conf"
fi

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if ! running "$dir/slurmctld.pid"; then
  say "starting slurmctld"
  # -c: a clean state (no jobs from an earlier run), -i: ignore state
  # files that do not match.
  slurmctld -c -i
fi
for i in $(seq "$nodes"); do
  if ! running "$dir/slurmd-n$i.pid"; then
    slurmd -N "n$i"
  fi
done

# Wait until every node is idle (or busy with jobs: mixed/allocated).
for _ in $(seq 300); do
  states=$(sinfo -h -p fedsched -N -o '%t' 2>/dev/null | sort -u | tr '\n' ' ' || true)
  n=$(sinfo -h -p fedsched -N -o '%N' 2>/dev/null | wc -l || true)
  if [ "$n" = "$nodes" ] && ! echo "$states" | grep -Eq 'unk|down|drain|drng|fail|boot|pow|npc|resv|\*'; then
    say "Slurm up: $nodes nodes x $cpus CPUs, partition fedsched ($states)"
    echo "$conf"
    exit 0
  fi
  # A node still DOWN from an earlier run: bring it back.
  scontrol update NodeName="n[1-$nodes]" State=RESUME >/dev/null 2>&1 || true
  sleep 0.2
done
say "Slurm did not become idle; see $dir/log"
sinfo -N >&2 || true
tail -20 "$dir"/log/*.log >&2 || true
exit 1
