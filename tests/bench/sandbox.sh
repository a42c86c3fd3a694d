#!/usr/bin/env bash
# The sandbox's cost per shell step: the same N-step plan of `echo` steps
# under a policy with `sandbox = "landlock"` and one with `sandbox = "none"`,
# run alternately ROUNDS times each in one session; prints the medians of
# the wall-clock time and of the CPU time (planrun and its children, from
# `perf stat`'s task-clock; skipped without perf), the difference per step
# (target: at most 0.5 ms) and the ratio. Never asserted in tests.
#
#   tests/bench/sandbox.sh            # N = 200, ROUNDS = 7
#   tests/bench/sandbox.sh 500        # another N
#   PLANRUN_BIN=/path/planrun tests/bench/sandbox.sh
#                                     # another build (e.g. before a change)
#   STRACE=1 tests/bench/sandbox.sh 50
#                                     # also: `strace -c -f` system call counts
#                                     # of one run of each (the extra calls a
#                                     # sandboxed step makes)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=echo_plans.sh
. tests/bench/echo_plans.sh
n=${1:-200}
rounds=${ROUNDS:-7}

if [ -n "${PLANRUN_BIN:-}" ]; then bin=$PLANRUN_BIN; else
  cargo build --release --quiet
  bin="$PWD/target/release/planrun"
fi
perf=""
if command -v perf >/dev/null && perf stat -x, -e task-clock true >/dev/null 2>&1; then perf=1; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/plans" "$work/landlock" "$work/none"
max=$(( n * 2 + 10 ))
echo_policy "$work/landlock/default.toml" "$max"
echo_policy "$work/none/default.toml" "$max"
sed -i 's|^search_path = .*|&\nsandbox = "landlock"|' "$work/landlock/default.toml"
sed -i 's|^search_path = .*|&\nsandbox = "none"|' "$work/none/default.toml"
echo_plan "$work/plans/bench.toml" bench "$n"

now() { date +%s%N; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
run() { # run MODE ID: one run; its wall time in ns on stdout, its CPU time in ns in $work/MODE.cpu
  local start
  start=$(now)
  if [ -n "$perf" ]; then
    perf stat -x, -e task-clock -o "$work/perf.out" \
      "$bin" --plan "$work/plans/bench.toml" --policies "$work/$1" --workspace "$work/ws-$1" --run-id "$2" --quiet
    echo $(( $(now) - start ))
    awk -F, '/task-clock/ { printf "%d\n", $1 * 1000000 }' "$work/perf.out" >> "$work/$1.cpu"
  else
    "$bin" --plan "$work/plans/bench.toml" --policies "$work/$1" --workspace "$work/ws-$1" --run-id "$2" --quiet
    echo $(( $(now) - start ))
  fi
}

# The record says which sandbox applied: check it once, so the comparison
# is never two unconfined runs.
run landlock check >/dev/null
grep -q '"kind":"landlock"' "$work/ws-landlock/runs/check/history.jsonl" \
  || { echo "the landlock runs are not sandboxed (no Landlock here?):"; grep -m1 -o '"sandbox":{[^}]*}' "$work/ws-landlock/runs/check/history.jsonl"; exit 1; }
grep -m1 -o '"sandbox":{[^}]*}' "$work/ws-landlock/runs/check/history.jsonl"

: > "$work/landlock.times"; : > "$work/none.times"; : > "$work/landlock.cpu"; : > "$work/none.cpu"
for r in $(seq 1 "$rounds"); do
  run none "n$r" >> "$work/none.times"
  run landlock "l$r" >> "$work/landlock.times"
done
row() { # row WHAT NONE_NS LANDLOCK_NS
  printf '%-6s %6s %8s %16.3f %16.3f %16.3f %8.3f\n' "$1" "$n" "$rounds" \
    "$(echo "scale=6; $2 / $n / 1000000" | bc)" \
    "$(echo "scale=6; $3 / $n / 1000000" | bc)" \
    "$(echo "scale=6; ($3 - $2) / $n / 1000000" | bc)" \
    "$(echo "scale=6; $3 / $2" | bc)"
}
printf '%-6s %6s %8s %16s %16s %16s %8s\n' what N rounds none_ms_step landlock_ms_step diff_ms_step ratio
row wall "$(median < "$work/none.times")" "$(median < "$work/landlock.times")"
if [ -n "$perf" ]; then row cpu "$(median < "$work/none.cpu")" "$(median < "$work/landlock.cpu")"; fi

if [ -n "${STRACE:-}" ]; then
  for mode in none landlock; do
    echo
    echo "strace -c -f, sandbox = $mode, $n steps:"
    strace -c -f -o "$work/strace.$mode" "$bin" --plan "$work/plans/bench.toml" --policies "$work/$mode" \
      --workspace "$work/ws-$mode" --run-id "strace" --quiet
    head -n 25 "$work/strace.$mode"
  done
fi
