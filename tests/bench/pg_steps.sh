#!/usr/bin/env bash
# The PostgreSQL store beside the file store, in the same session (figures
# for the closing note; never asserted in tests):
#
#   tests/bench/pg_steps.sh            # N=200 steps; R=24 runs of M=20 steps for the workers
#   tests/bench/pg_steps.sh 500 48 20  # other sizes
#   BIN=target/debug/planrun tests/bench/pg_steps.sh 50 8 10   # a quick check of the script
#
# 1. One N-step plan of `echo` steps on each store: seconds and ms per step
#    (one durable checkpoint per step: one `fdatasync` on files, one commit
#    on PostgreSQL), and on PostgreSQL the commits and WAL syncs per step
#    (from pg_stat_database and pg_stat_wal, read before and after).
#    Then the same for an N-step plan of `read_file` steps (no child
#    process: the store is most of a step; the checkpoint after a read has
#    no sync of its own on files and commits asynchronously on PostgreSQL).
# 2. Worker throughput: R queued runs of M steps (`--queue`), driven to the
#    end by `planrun worker --once --concurrency W` for W = 1, 2, 4: steps per
#    second, commits and WAL syncs per step (group commit shows as fewer WAL
#    syncs than commits); beside it, the same R runs on the file store, W
#    command-line runs at a time (each process its own syncs, its start-up
#    included).
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
{
  printf 'version = 1\nid = "reads"\n'
  for i in $(seq 1 "$n"); do printf '\n[[steps]]\nid = "r%s"\nkind = "read_file"\npath = "in.txt"\n' "$i"; done
  printf '\n[[steps]]\nid = "end"\nkind = "finish"\n'
} >"$work/plans/reads.toml"
now() { date +%s.%N; }
planrun() { (cd "$work" && "$BIN" --plans plans --policies policies "$@"); }

# Commits and WAL syncs of the server so far (the bench's own psql calls
# add one commit each: negligible beside hundreds of steps).
counters() { sql "SELECT (SELECT sum(xact_commit) FROM pg_stat_database)::bigint || ' ' || (SELECT wal_sync FROM pg_stat_wal)"; }
per_step() { # before after steps -> "commits/step wal_syncs/step"
  read -r c0 w0 <<<"$1"; read -r c1 w1 <<<"$2"
  printf '%.2f %.2f' "$(echo "($c1 - $c0) / $3" | bc -l)" "$(echo "($w1 - $w0) / $3" | bc -l)"
}

for plan in long reads; do
  echo "== one $n-step plan ($([ "$plan" = long ] && echo echo || echo read_file) steps)"
  printf '%-12s %10s %12s %14s %16s\n' store seconds ms_per_step commits_per_step wal_syncs_per_step
  for store in file "$url"; do
    ws="$work/ws-one-$plan-$([ "$store" = file ] && echo file || echo pg)"
    mkdir -p "$ws" && echo hello >"$ws/in.txt"
    before=$(counters)
    start=$(now)
    planrun --workspace "$ws" --store "$store" --plan "plans/$plan.toml" -q >/dev/null
    secs=$(echo "$(now) - $start" | bc)
    name=$([ "$store" = file ] && echo file || echo postgres)
    if [ "$name" = file ]; then counts="- -"; else counts=$(per_step "$before" "$(counters)" $(( n + 1 ))); fi
    read -r commits syncs <<<"$counts"
    printf '%-12s %10.3f %12.3f %14s %16s\n' "$name" "$secs" "$(echo "$secs * 1000 / ($n + 1)" | bc -l)" "$commits" "$syncs"
  done
done

echo "== workers: $runs queued runs of $m steps"
printf '%-12s %10s %12s %14s %16s %18s\n' workers seconds steps_per_s commits_per_step wal_syncs_per_step file_store_steps_per_s
for workers in 1 2 4; do
  # The file store: the same runs, $workers command-line runs at a time.
  start=$(now)
  seq 1 "$runs" | xargs -P "$workers" -I{} "$BIN" --plans "$work/plans" --policies "$work/policies" \
    --workspace "$work/ws-file-$workers" --plan "$work/plans/short.toml" -q >/dev/null
  file_rate=$(echo "$runs * ($m + 1) / ($(now) - $start)" | bc -l)
  ws="$work/ws-$workers"
  for i in $(seq 1 "$runs"); do
    planrun --workspace "$ws" --store "$url" --plan plans/short.toml --run-id "w$workers-$i" --queue >/dev/null 2>&1
  done
  before=$(counters)
  start=$(now)
  planrun --workspace "$ws" --store "$url" worker --once --concurrency "$workers" >/dev/null
  secs=$(echo "$(now) - $start" | bc)
  read -r commits syncs <<<"$(per_step "$before" "$(counters)" $(( runs * (m + 1) )))"
  left=$(sql "SELECT count(*) FROM runs WHERE run_id LIKE 'w$workers-%' AND status <> 'done'")
  [ "$left" = 0 ] || echo "warning: $left run(s) not done with $workers worker(s)" >&2
  printf '%-12s %10.3f %12.1f %14s %16s %18.1f\n' "$workers" "$secs" "$(echo "$runs * ($m + 1) / $secs" | bc -l)" "$commits" "$syncs" "$file_rate"
done
