#!/usr/bin/env bash
# Counts the durable syncs (fsync, fdatasync, sync_file_range, syncfs) of one
# CLI run of a generated N-step plan with `strace -c -f`, and prints syncs
# per step (never asserted in tests).
#
#   tests/bench/syncs.sh              # N = 31 (30 `echo` steps and a `finish`)
#   tests/bench/syncs.sh 101          # another size
#   PLANRUN_BIN=path/to/planrun tests/bench/syncs.sh   # another build (e.g. main's)
#
# Uses the debug build (the count of syscalls does not depend on the
# profile) unless PLANRUN_BIN says otherwise. Needs `strace`
# (apt-get install -y strace).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=echo_plans.sh
. tests/bench/echo_plans.sh
n=${1:-31}
[ "$n" -ge 2 ] || { echo "N must be at least 2" >&2; exit 2; }
command -v strace >/dev/null || { echo "strace is needed: apt-get install -y strace" >&2; exit 2; }
if [ -z "${PLANRUN_BIN:-}" ]; then
  cargo build --quiet
  PLANRUN_BIN="$PWD/target/debug/planrun"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/plans" "$work/policies"
echo_policy "$work/policies/default.toml" $(( n * 2 + 10 ))
plan="$work/plans/syncs_$n.toml"
echo_plan "$plan" "syncs_$n" $(( n - 1 ))
out="$work/strace.txt"
(cd "$work" && strace -c -f -o "$out" -e trace=fsync,fdatasync,sync_file_range,syncfs,sync \
  "$PLANRUN_BIN" --plan "plans/syncs_$n.toml" --workspace "$work/workspace" --run-id bench >/dev/null 2>&1)
# `strace -c` rows: % time, seconds, usecs/call, calls, [errors,] syscall.
count() { awk -v name="$1" '$NF == name { print $4; found = 1 } END { if (!found) print 0 }' "$out"; }
fsync=$(count fsync)
fdatasync=$(count fdatasync)
other=$(( $(count sync_file_range) + $(count syncfs) + $(count sync) ))
total=$(( fsync + fdatasync + other ))
printf 'steps %s: fsync %s + fdatasync %s + other %s = %s syncs, %s per step\n' \
  "$n" "$fsync" "$fdatasync" "$other" "$total" "$(awk -v t="$total" -v n="$n" 'BEGIN { printf "%.2f", t / n }')"
