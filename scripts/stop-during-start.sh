#!/usr/bin/env bash
# Stops `fedsched node` (process executor; EXECUTOR=slurm: the Slurm
# executor, in front of the Slurm of $SLURM_CONF) while it starts jobs, N times,
# and counts what became of the jobs (docs/operations.md, "A stop during a
# job's start"). Each cycle starts the node, submits 7 jobs at once and
# sends SIGTERM (SIG=KILL: SIGKILL) 0 to 90 ms later; a last run waits until
# no job is PENDING or RUNNING (at most 5 minutes) and lists them. Each job
# appends its id to a markers file, so a job that ran twice shows twice.
# With Slurm it also counts the Slurm jobs of each fedsched job (from
# squeue and the job completion log of scripts/slurm-up.sh's Slurm): a
# job submitted twice shows there even if it never ran twice.
# Usage: [FEDSCHED=bin] [SIG=TERM|KILL] [PORT=17393] [EXECUTOR=process|slurm] [SITE=name]
# scripts/stop-during-start.sh [N] (from the repository's root; N defaults
# to 20). Runs jobs as root when run as root (--allow-root-jobs).
set -u
n=${1:-20}
sig=${SIG:-TERM}
port=${PORT:-17393}
dir=$(mktemp -d)
. scripts/fedsched-bin.sh
addr=(--addr "127.0.0.1:$port")
executor=${EXECUTOR:-process}
# A site name of its own: job ids (<site>.<n>) then differ from an earlier
# run's, which the same Slurm may still know.
site=${SITE:-sds$(date +%H%M%S)}
case $executor in
process) node=("$bin" node --site "$site" --data "$dir/data" --executor process --allow-root-jobs --procs 64 --listen "127.0.0.1:$port" --insecure) ;;
slurm)
  [ -n "${SLURM_CONF:-}" ] || { echo "EXECUTOR=slurm needs SLURM_CONF (export SLURM_CONF=\$(scripts/slurm-up.sh | tail -1))" >&2; exit 1; }
  node=("$bin" node --site "$site" --data "$dir/data" --executor slurm --slurm-poll-interval 200ms --allow-root-jobs --listen "127.0.0.1:$port" --insecure) ;;
*) echo "EXECUTOR must be process or slurm" >&2; exit 1 ;;
esac
job=(sh -c "echo \$FEDSCHED_JOB_ID >> $dir/markers; sleep 5")
touch "$dir/markers"
began=$(date +%Y-%m-%dT%H:%M:%S) # Slurm's local time
for i in $(seq 1 "$n"); do
  "${node[@]}" >"$dir/node-$i.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 50); do # the first submission waits until the node serves
    "$bin" submit "${addr[@]}" --procs 1 --estimate 60s --timeout 2s -- "${job[@]}" >/dev/null 2>&1 && break
    sleep 0.1
  done
  subs=()
  for _ in 1 2 3 4 5 6; do
    "$bin" submit "${addr[@]}" --procs 1 --estimate 60s --timeout 2s -- "${job[@]}" >/dev/null 2>&1 &
    subs+=($!)
  done
  sleep "0.0$((RANDOM % 10))"
  kill "-$sig" "$pid"
  { wait "$pid"; } 2>/dev/null # (no "Killed" line from bash)
  echo "node exit $?" >>"$dir/cycles.log"
  wait "${subs[@]}"
done
"${node[@]}" >"$dir/node-final.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do # at most 5 minutes (Slurm runs the backlog on its CPUs)
  sleep 0.5
  "$bin" jobs "${addr[@]}" --all --format id,state,reason >"$dir/jobs.txt" 2>/dev/null || continue
  awk 'NR>1 && ($2=="PENDING" || $2=="RUNNING")' "$dir/jobs.txt" | grep -q . || break
done
kill -TERM "$pid"
wait "$pid"
if [ "$executor" = slurm ]; then
  # Slurm jobs by name: those Slurm still holds, and the ended ones from its
  # completion log (squeue forgets them after MinJobAge).
  jobcomp=$(scontrol show config | awk -F' = ' '/^JobCompLoc/{print $2}')
  awk 'NR>1{print $1}' "$dir/jobs.txt" | sort >"$dir/ids.txt"
  # Only those submitted since this run began: job ids repeat across runs.
  { squeue -h -t all -o '%i %j %V'; [ -f "$jobcomp" ] && sed -n 's/^JobId=\([0-9]*\) .* Name=\([^ ]*\) .* SubmitTime=\([^ ]*\) .*/\1 \2 \3/p' "$jobcomp"; } |
    awk -v t="$began" '$3 >= t' | sort -u | awk '{print $2}' | sort | join - "$dir/ids.txt" >"$dir/slurm-names.txt"
fi
echo "dir $dir"
echo "cycles (node exit status):"
sort "$dir/cycles.log" | uniq -c
echo "jobs by state and reason:"
awk 'NR>1{print $2, $3}' "$dir/jobs.txt" | sort | uniq -c
echo "jobs listed: $(awk 'NR>1' "$dir/jobs.txt" | wc -l); runs in markers: $(wc -l <"$dir/markers"); ids run twice: $(sort "$dir/markers" | uniq -d | wc -l)"
echo "starts cut by the stop (logged): $(cat "$dir"/node-*.log | grep -cE '(not started|start cut short): the node is stopping'); failed starts: $(cat "$dir"/node-*.log | grep -c 'job failed to start'); orphaned groups killed: $(cat "$dir"/node-*.log | grep -c 'orphaned process group')"
if [ "$executor" = slurm ]; then
  echo "sbatch killed by the stop (logged): $(cat "$dir"/node-*.log | grep -E '(not started|start cut short): the node is stopping' | grep -c 'sbatch:'); sbatch let finish by the stop (logged): $(cat "$dir"/node-*.log | grep -c 'the node stopped while sbatch ran'); submitted again, the earlier start never reached Slurm (logged): $(cat "$dir"/node-*.log | grep -c 'earlier start was cut short before Slurm queued it')"
  echo "Slurm jobs of these ids: $(wc -l <"$dir/slurm-names.txt"); ids submitted twice: $(uniq -d "$dir/slurm-names.txt" | wc -l); ids never submitted: $(sort -u "$dir/slurm-names.txt" | comm -13 - "$dir/ids.txt" | wc -l)"
fi
echo "claimed without exit.json: $(for c in "$dir"/data/jobs/*/*/claim; do [ -e "$c" ] && [ ! -e "$(dirname "$c")/exit.json" ] && echo "$c"; done | wc -l)"
