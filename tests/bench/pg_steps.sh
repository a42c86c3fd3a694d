#!/usr/bin/env bash
# The PostgreSQL store beside the file store, in the same session (figures
# for the closing note; never asserted in tests):
#
#   tests/bench/pg_steps.sh            # N=200 steps; R=24 runs of M=20 steps for the workers
#   tests/bench/pg_steps.sh 500 48 20  # other sizes
#   BIN=target/debug/planrun tests/bench/pg_steps.sh 50 8 10   # a quick check of the script
#
# 1. One N-step plan of `echo` steps on each store: seconds and ms per step
#    (one durable checkpoint per step: fsyncs on files, one commit on PostgreSQL).
# 2. Worker throughput: R runs of M steps, each killed after its first step
#    (PLANRUN_CRASH_AT) with its lease then expired, driven to the end by
#    `planrun worker --once --concurrency W` for W = 1, 2, 4: steps per second.
#
# Starts its own PostgreSQL cluster (.ci/postgres) and needs `psql`.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=echo_plans.sh
. tests/bench/echo_plans.sh
n=${1:-200}
runs=${2:-24}
m=${3:-20}

if [ -z "${BIN:-}" ]; then
  # The PostgreSQL store is an opt-in feature: its own target folder, so
  # that the default release binary is not rebuilt.
  cargo build --release --quiet --features postgres --target-dir target/postgres
  BIN="$PWD/target/postgres/release/planrun"
fi
work=$(mktemp -d)
pg_env=$(.ci/postgres start)
eval "$pg_env"
trap '.ci/postgres stop "$PLANRUN_TEST_PG_DIR"; rm -rf "$work"' EXIT
port=$(echo "$PLANRUN_TEST_PG" | sed -E 's/.*port=([0-9]+).*/\1/')
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$PLANRUN_TEST_PG" -c "$1"; }
"$BIN" store migrate --store "$url" >/dev/null

mkdir -p "$work/plans" "$work/policies"
echo_policy "$work/policies/default.toml" $(( (n > m ? n : m) * 2 + 10 ))
echo_plan "$work/plans/long.toml" long "$n"
echo_plan "$work/plans/short.toml" short "$m"
now() { date +%s.%N; }
planrun() { (cd "$work" && "$BIN" --plans plans --policies policies "$@"); }

echo "== one $n-step plan"
printf '%-12s %10s %12s\n' store seconds ms_per_step
for store in file "$url"; do
  start=$(now)
  planrun --workspace "$work/ws-one" --store "$store" --plan plans/long.toml -q >/dev/null
  secs=$(echo "$(now) - $start" | bc)
  name=$([ "$store" = file ] && echo file || echo postgres)
  printf '%-12s %10.3f %12.3f\n' "$name" "$secs" "$(echo "$secs * 1000 / ($n + 1)" | bc -l)"
done

echo "== workers: $runs runs of $m steps, each killed after its first step"
printf '%-12s %10s %12s\n' workers seconds steps_per_s
for workers in 1 2 4; do
  ws="$work/ws-$workers"
  for i in $(seq 1 "$runs"); do
    PLANRUN_CRASH_AT=s1:after_effect planrun --workspace "$ws" --store "$url" --plan plans/short.toml \
      --run-id "w$workers-$i" -q >/dev/null 2>&1 || true
  done
  sql "UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE owner_id IS NOT NULL" >/dev/null
  start=$(now)
  planrun --workspace "$ws" --store "$url" worker --once --concurrency "$workers" >/dev/null
  secs=$(echo "$(now) - $start" | bc)
  left=$(sql "SELECT count(*) FROM runs WHERE run_id LIKE 'w$workers-%' AND status <> 'done'")
  [ "$left" = 0 ] || echo "warning: $left run(s) not done with $workers worker(s)" >&2
  printf '%-12s %10.3f %12.1f\n' "$workers" "$secs" "$(echo "$runs * $m / $secs" | bc -l)"
done
