#!/usr/bin/env bash
# Load test of `planrun serve` on loopback: concurrent clients POST /runs
# with the `stub` adapter and with the `agent` adapter (`flow_pwd`: "test
# flow pwd to file"), then report requests per second and latency
# percentiles, and check that no run was lost (every 201 answer is `done`,
# every run id is distinct, and every run's records exist on disk).
# Never asserted in tests. `tests/bench/wrk.sh` measures the same loads with
# wrk (higher rates than curl clients can drive), with syncs per request.
#
#   tests/bench/serve.sh                  # 1000 stub + 300 agent requests, 16 clients
#   tests/bench/serve.sh 2000 500 32      # other counts and concurrency
#   PLANRUN_BIN=path/to/planrun tests/bench/serve.sh   # another build (no cargo build)
#
# Bounded: at most 5000 requests per adapter, 64 clients, 60 s per request,
# 10 minutes overall; traffic only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/../.."
stub_n=${1:-1000}
agent_n=${2:-300}
clients=${3:-16}
[ "$stub_n" -le 5000 ] && [ "$agent_n" -le 5000 ] && [ "$clients" -le 64 ] || { echo "too large" >&2; exit 2; }

# shellcheck source=serve_start.sh
. tests/bench/serve_start.sh
release_bin
work=$(mktemp -d)
server_pid=
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

start_serve "$work"
echo "server $base (release build), $clients concurrent clients"
printf '%-8s %6s %8s %9s %9s %9s %9s %s\n' adapter runs "req/s" "p50 ms" "p90 ms" "p99 ms" "max ms" "lost"

bench() {
  local adapter=$1 n=$2 goal=$3 out="$work/$1.tsv"
  local body="{\"goal\":\"$goal\",\"adapter\":\"$adapter\"}"
  local start end
  start=$(date +%s.%N)
  seq "$n" | timeout 600 xargs -P "$clients" -I{} \
    curl -s --noproxy '*' -m 60 -X POST "$base/runs" -H 'content-type: application/json' -d "$body" \
    -w '\t%{http_code}\t%{time_total}\n' >"$out" || true
  end=$(date +%s.%N)
  local ok ids unique lost=0 id
  ok=$(awk -F'\t' '$2 == 201 && $1 ~ /"status":"done"/' "$out" | wc -l)
  ids=$(grep -o '"run_id":"[^"]*"' "$out" | cut -d'"' -f4)
  unique=$(printf '%s\n' "$ids" | sort -u | grep -c . || true)
  for id in $ids; do
    [ -f "$work/workspace/bridge/runs/$id/state.json" ] || lost=$((lost + 1))
    if [ "$adapter" = agent ]; then
      [ -f "$work/workspace/runs/agent-$id/state.json" ] || lost=$((lost + 1))
    fi
  done
  lost=$((lost + n - ok + ok - unique))
  cut -f3 "$out" | sort -n | awk -v n="$n" -v secs="$(echo "$end - $start" | bc)" -v a="$adapter" -v lost="$lost" '
    { v[NR] = $1 * 1000 }
    function p(q) { i = int(q * NR + 0.999999); if (i < 1) i = 1; return v[i] }
    END { printf "%-8s %6d %8.1f %9.1f %9.1f %9.1f %9.1f %d\n", a, NR, n / secs, p(0.5), p(0.9), p(0.99), v[NR], lost }'
}

bench stub "$stub_n" "benchmark goal"
bench agent "$agent_n" "test flow pwd to file"
kill -TERM "$server_pid"
wait "$server_pid" && echo "server stopped cleanly (exit 0)"
server_pid=
