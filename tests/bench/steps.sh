#!/usr/bin/env bash
# Times generated N-step plans against a plain shell script running the same
# commands, in the same session, and prints ratios (never asserted in tests).
#
#   tests/bench/steps.sh            # N = 10 100 1000 10000
#   tests/bench/steps.sh 10 100     # other sizes
#   tests/bench/steps.sh --rich 100 1000
#                                   # also: the same N steps in a plan that declares
#                                   # 10 inputs (5 given with --input) and gives every
#                                   # step 5 secrets in its env, timed alternately with
#                                   # the plain plan (ROUNDS=5 each, medians compared)
#
# Each plan step is `echo step-<i>` (an allowed external program), so the
# planrun figure is the tool's own cost plus planrun's per-step work (policy,
# records, one durable checkpoint). The shell baseline runs `/bin/echo` N
# times with output to /dev/null.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=echo_plans.sh
. tests/bench/echo_plans.sh
rich=""
if [ "${1:-}" = "--rich" ]; then rich=1; shift; fi
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10 100 1000 10000)

cargo build --release --quiet
bin="$PWD/target/release/planrun"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/plans" "$work/policies"
max=$(( ${sizes[-1]} * 2 + 10 ))
echo_policy "$work/policies/default.toml" "$max"
if [ -n "$rich" ]; then
  mkdir -p "$work/rich"
  rich_policy "$work/rich/default.toml" "$max"
  for k in 1 2 3 4 5; do export "BENCH_SECRET_$k=bench-secret-$k-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"; done
fi

now() { date +%s.%N; }
rss_kb() { # peak RSS of a command, in KiB, from /proc when GNU time is absent
  if [ -x /usr/bin/time ]; then /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; else "$@" >/dev/null 2>&1; echo "?"; fi
}

printf '%8s %12s %12s %8s %12s %10s\n' N planrun_s shell_s ratio ms_per_step peak_rss_kb
prev=""
for n in "${sizes[@]}"; do
  plan="$work/plans/bench_$n.toml"
  echo_plan "$plan" "bench_$n" "$n"
  script="$work/bench_$n.sh"
  { echo '#!/bin/sh'; for i in $(seq 1 "$n"); do echo "/bin/echo step-$i > /dev/null"; done; } > "$script"

  start=$(now); sh "$script"; shell_s=$(echo "$(now) - $start" | bc)
  start=$(now)
  "$bin" --plan "$plan" --policies "$work/policies" --workspace "$work/ws" --run-id "bench-$n" --quiet
  planrun_s=$(echo "$(now) - $start" | bc)
  rss=$(rss_kb "$bin" --plan "$plan" --policies "$work/policies" --workspace "$work/ws" --run-id "rss-$n" --quiet)
  ratio=$(echo "scale=2; $planrun_s / $shell_s" | bc)
  per=$(echo "scale=3; $planrun_s * 1000 / $n" | bc)
  printf '%8s %12.3f %12.3f %8s %12s %10s\n' "$n" "$planrun_s" "$shell_s" "$ratio" "$per" "$rss"
  if [ -n "$prev" ]; then
    echo "         scaling: time($n) / time(${prev%%:*}) = $(echo "scale=2; $planrun_s / ${prev#*:}" | bc)"
  fi
  prev="$n:$planrun_s"
done

[ -n "$rich" ] || exit 0

# The plain and the rich plan of each size, run alternately so that both see
# the same machine; the medians are compared per step.
rounds=${ROUNDS:-5}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
given=()
for k in 1 2 3 4 5; do given+=(--input "i$k=given-$k"); done
echo
printf '%8s %14s %14s %14s\n' N plain_ms_step rich_ms_step rich/plain
for n in "${sizes[@]}"; do
  plain="$work/plans/bench_$n.toml"
  rich_file="$work/plans/rich_$n.toml"
  rich_plan "$rich_file" "rich_$n" "$n"
  : > "$work/plain.times"; : > "$work/rich.times"
  for r in $(seq 1 "$rounds"); do
    start=$(now)
    "$bin" --plan "$plain" --policies "$work/policies" --workspace "$work/ws" --run-id "plain-$n-$r" --quiet
    echo "$(now) - $start" | bc >> "$work/plain.times"
    start=$(now)
    "$bin" --plan "$rich_file" --policies "$work/rich" --workspace "$work/ws" --run-id "rich-$n-$r" --quiet "${given[@]}"
    echo "$(now) - $start" | bc >> "$work/rich.times"
  done
  plain_s=$(median < "$work/plain.times"); rich_s=$(median < "$work/rich.times")
  printf '%8s %14.3f %14.3f %14.2f\n' "$n" "$(echo "$plain_s * 1000 / $n" | bc -l)" \
    "$(echo "$rich_s * 1000 / $n" | bc -l)" "$(echo "$rich_s / $plain_s" | bc -l)"
done
