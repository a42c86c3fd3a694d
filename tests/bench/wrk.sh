#!/usr/bin/env bash
# Load test of `planrun serve` with wrk, one server process for the whole
# session (release build, loopback only):
#
#   1. wrk -cC -dS on GET /health, POST /runs (stub) and POST /runs (agent,
#      `flow_pwd`: "test flow pwd to file"): requests per second, p50, p99;
#   2. syncs per request: `strace -c -f -p <serve pid>` attached while a fixed
#      number of stub requests and then of agent requests are sent (C
#      concurrent curl clients), counting fsync, fdatasync, syncfs,
#      sync_file_range and sync;
#   3. no run lost: every run answered 201 under wrk reads back `done` through
#      GET /runs/{id} (which verifies the record's seal and hash chain), and
#      every agent run verifies (`planrun runs --json`: none unreadable).
#
#   tests/bench/wrk.sh                  # 10 s per load, 16 connections, 400 requests under strace
#   tests/bench/wrk.sh 20 32 1000       # other duration, connections, strace requests
#   PLANRUN_BIN=path/to/planrun tests/bench/wrk.sh   # another build (no cargo build)
#   BENCH_DIR=/mnt/planrun tests/bench/wrk.sh        # workspace on another file system
#   KEEP=/tmp/kept tests/bench/wrk.sh                # keep the workspace (builds compared in a row)
#
# Bounded: at most 60 s per load, 64 connections, 5000 requests under strace;
# traffic only to 127.0.0.1. Needs wrk, strace, curl (apt-get install -y wrk
# strace curl). Never asserted in tests; exits 1 when a run was lost.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-10}
conns=${2:-16}
traced=${3:-400}
[ "$secs" -le 60 ] && [ "$conns" -le 64 ] && [ "$traced" -le 5000 ] || { echo "too large" >&2; exit 2; }
for tool in wrk strace curl; do
  command -v "$tool" >/dev/null || { echo "$tool is needed: apt-get install -y wrk strace curl" >&2; exit 2; }
done
# shellcheck source=serve_start.sh
. tests/bench/serve_start.sh
release_bin
work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/planrun-wrk.XXXXXX")
# The client's own files (the answered run ids wrk writes, one line per
# answer) go to a memory file system when there is one: on the workspace's
# file system every barrier (`syncfs`) would flush them too, and wrk's
# threads would stall on writes to pages under writeback, which measures
# the client, not the server (on the 2-core machine: stub 1 648 req/s, p99
# 26.6 ms with the ids beside the workspace, 2 698 and 11.9 ms without).
ids=$(mktemp -d "$([ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/planrun-wrk-ids.XXXXXX")
server_pid=
# KEEP=DIR: move the workspace into DIR instead of deleting it (deleting
# tens of thousands of files slows the next run's file creation on an ext4
# without a journal for some minutes: see docs/performance.md).
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$ids"
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && mv "$work" "$KEEP/"; else rm -rf "$work"; fi
}
trap cleanup EXIT

start_serve "$work"
echo "server $base ($PLANRUN_BIN), workspace on $(df --output=fstype "$work" | tail -1), $(nproc) cores"
echo "wrk -t2 -c$conns -d${secs}s, one after the other on the same server:"
printf '%-14s %9s %8s %8s %8s %6s\n' load "req/s" "p50 ms" "p99 ms" answered other

stub_goal="benchmark goal"
agent_goal="test flow pwd to file"
load() {
  local name=$1 path=$2; shift 2
  local result
  # Each load starts with nothing dirty on the workspace's file system:
  # the first barriers would otherwise also write back what came before
  # (another program's writes, the access times the last check's reads of
  # every record set), which shows as the load's p99.
  sync -f "$work"
  result=$(wrk -t2 -c"$conns" -d"${secs}s" --latency -s tests/bench/wrk.lua "$base$path" -- "$@" | grep '^RESULT')
  # RESULT rps=… p50_ms=… p99_ms=… ok=… other=… errors=…
  eval "${result#RESULT }"
  printf '%-14s %9.1f %8.2f %8.2f %8d %6d\n' "$name" "$rps" "$p50_ms" "$p99_ms" "$ok" $((other + errors))
}
load "GET /health" /health health
load "POST stub" /runs stub "$stub_goal" "$ids/stub.ids"
load "POST agent" /runs agent "$agent_goal" "$ids/agent.ids"

# Syncs per request: strace attached to every thread of the server.
count_syncs() {
  local adapter=$1 goal=$2 out="$work/strace.$1"
  strace -c -f -p "$server_pid" -o "$out" -e trace=fsync,fdatasync,syncfs,sync_file_range,sync 2>/dev/null &
  local strace_pid=$!
  sleep 1
  seq "$traced" | xargs -P "$conns" -I{} curl -s --noproxy '*' -m 60 -o /dev/null -w '%{http_code}\n' \
    -X POST "$base/runs" -H 'content-type: application/json' \
    -d "{\"goal\":\"$goal\",\"adapter\":\"$adapter\"}" >"$work/codes.$adapter"
  kill -INT "$strace_pid"
  wait "$strace_pid" 2>/dev/null || true
  # `strace -c` rows: % time, seconds, usecs/call, calls, [errors,] syscall.
  local total created
  total=$(awk '$NF ~ /^(fsync|fdatasync|syncfs|sync_file_range|sync)$/ { sum += $4 } END { print sum + 0 }' "$out")
  created=$(grep -c '^201$' "$work/codes.$adapter" || true)
  local detail
  detail=$(awk '$NF ~ /^(fsync|fdatasync|syncfs|sync_file_range|sync)$/ { printf "%s %s ", $NF, $4 }' "$out")
  printf '%-6s %5d requests (%d answered 201): %s= %d syncs, %.3f per request\n' \
    "$adapter" "$traced" "$created" "$detail" "$total" "$(awk -v t="$total" -v n="$traced" 'BEGIN { print t / n }')"
}
echo "syncs under strace -c -f -p (attached: every thread, every syscall stopped, so slower than above):"
count_syncs stub "$stub_goal"
count_syncs agent "$agent_goal"

# No run lost: every answered run reads back `done` through GET /runs/{id}
# (which verifies the record's seal and hash chain), and every agent run
# verifies (`planrun runs --json` lists a run that does not as unreadable).
cat "$ids"/stub.ids.* "$ids"/agent.ids.* 2>/dev/null | sort -u >"$work/answered"
answered=$(wc -l <"$work/answered")
sed "s|.*|url = \"$base/runs/&\"|" "$work/answered" >"$work/curl.cfg"
{ curl -s --noproxy '*' -w '\n' -K "$work/curl.cfg" || true; } \
  | { grep -o '"run_id":"[^"]*","goal":"[^"]*","status":"done"' || true; } | cut -d'"' -f4 | sort -u >"$work/done"
lost=$(comm -23 "$work/answered" "$work/done" | wc -l)
runs_code=0
"$PLANRUN_BIN" runs --json --workspace "$work/workspace" >"$work/agent_runs.json" || runs_code=$?
agent_runs=$({ grep -o '"run_id": *"[^"]*"' "$work/agent_runs.json" || true; } | wc -l)
agent_unreadable=$({ grep -o '"status": *"unreadable"' "$work/agent_runs.json" || true; } | wc -l)
echo "no run lost: $answered runs answered 201 under wrk, $lost of them not read back done;" \
  "$agent_runs agent runs, $agent_unreadable unreadable (planrun runs exit $runs_code)"
kill -TERM "$server_pid"
wait "$server_pid" && echo "server stopped cleanly (exit 0)"
server_pid=
[ "$lost" -eq 0 ] && [ "$agent_unreadable" -eq 0 ] && [ "$runs_code" -eq 0 ]
