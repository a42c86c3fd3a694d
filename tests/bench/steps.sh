#!/usr/bin/env bash
# Times generated N-step plans against a plain shell script running the same
# commands, in the same session, and prints ratios (never asserted in tests).
#
#   tests/bench/steps.sh            # N = 10 100 1000 10000
#   tests/bench/steps.sh 10 100     # other sizes
#
# Each plan step is `echo step-<i>` (an allowed external program), so the
# planrun figure is the tool's own cost plus planrun's per-step work (policy,
# records, one durable checkpoint). The shell baseline runs `/bin/echo` N
# times with output to /dev/null.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=echo_plans.sh
. tests/bench/echo_plans.sh
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10 100 1000 10000)

cargo build --release --quiet
bin="$PWD/target/release/planrun"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/plans" "$work/policies"
max=$(( ${sizes[-1]} * 2 + 10 ))
echo_policy "$work/policies/default.toml" "$max"

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
