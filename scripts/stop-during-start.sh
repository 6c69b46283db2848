#!/usr/bin/env bash
# Stops `fedsched node` (process executor) while it starts jobs, N times,
# and counts what became of the jobs (docs/operations.md, "A stop during a
# job's start"). Each cycle starts the node, submits 7 jobs at once and
# sends SIGTERM (SIG=KILL: SIGKILL) 0 to 90 ms later; a last run waits until
# no job is PENDING or RUNNING (at most 60 s) and lists them. Each job
# appends its id to a markers file, so a job that ran twice shows twice.
# Usage: [FEDSCHED=bin] [SIG=TERM|KILL] [PORT=17393] scripts/stop-during-start.sh [N]
# (from the repository's root; N defaults to 20). Runs jobs as root when
# run as root (--allow-root-jobs).
set -u
n=${1:-20}
sig=${SIG:-TERM}
port=${PORT:-17393}
dir=$(mktemp -d)
. scripts/fedsched-bin.sh
addr=(--addr "127.0.0.1:$port")
node=("$bin" node --data "$dir/data" --executor process --allow-root-jobs --procs 64 --listen "127.0.0.1:$port" --insecure)
job=(sh -c "echo \$FEDSCHED_JOB_ID >> $dir/markers; sleep 5")
touch "$dir/markers"
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
for _ in $(seq 1 120); do
  sleep 0.5
  "$bin" jobs "${addr[@]}" --all --format id,state,reason >"$dir/jobs.txt" 2>/dev/null || continue
  awk 'NR>1 && ($2=="PENDING" || $2=="RUNNING")' "$dir/jobs.txt" | grep -q . || break
done
kill -TERM "$pid"
wait "$pid"
echo "dir $dir"
echo "cycles (node exit status):"
sort "$dir/cycles.log" | uniq -c
echo "jobs by state and reason:"
awk 'NR>1{print $2, $3}' "$dir/jobs.txt" | sort | uniq -c
echo "jobs listed: $(awk 'NR>1' "$dir/jobs.txt" | wc -l); runs in markers: $(wc -l <"$dir/markers"); ids run twice: $(sort "$dir/markers" | uniq -d | wc -l)"
echo "starts cut by the stop (logged): $(cat "$dir"/node-*.log | grep -cE '(not started|start cut short): the node is stopping'); failed starts: $(cat "$dir"/node-*.log | grep -c 'job failed to start'); orphaned groups killed: $(cat "$dir"/node-*.log | grep -c 'orphaned process group')"
echo "claimed without exit.json: $(for c in "$dir"/data/jobs/*/*/claim; do [ -e "$c" ] && [ ! -e "$(dirname "$c")/exit.json" ] && echo "$c"; done | wc -l)"
