#!/usr/bin/env bash
# Times `planrun check` on a folder of N generated plan files (default 5000)
# plus the default policy, and prints the figure (never asserted in tests).
#
#   tests/bench/check.sh          # N = 5000
#   tests/bench/check.sh 20000    # another size
#
# Each plan has a unique keyword and four steps (shell, write_file with a
# template, read_file, finish), so every check runs: parsing, validation,
# template lints, plan-vs-policy (including the static shell decision) and
# the routing cross-checks over all keywords.
set -euo pipefail
cd "$(dirname "$0")/../.."
count=${1:-5000}

cargo build --release --quiet
bin="${CARGO_TARGET_DIR:-$PWD/target}/release/planrun"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/plans" "$work/policies"
cp policies/default.toml "$work/policies/"
for i in $(seq -w 1 "$count"); do
  cat > "$work/plans/plan_$i.toml" <<PLAN
version = 1
id = "plan_$i"
description = "generated plan $i"
keywords = ["bench goal $i"]
default = $([ "$((10#$i))" -eq 1 ] && echo true || echo false)

[[steps]]
id = "list"
kind = "shell"
command = ["ls", "-la"]

[[steps]]
id = "save"
kind = "write_file"
path = "out/$i.txt"
content = "{{ steps.list.output_text }}"

[[steps]]
id = "read"
kind = "read_file"
path = "out/$i.txt"

[[steps]]
id = "done"
kind = "finish"
PLAN
done

echo "planrun check on $count plan files (+1 policy):"
for run in 1 2 3; do
  start=$(date +%s.%N)
  "$bin" check --plans "$work/plans" --policies "$work/policies" > "$work/out.txt" || true
  end=$(date +%s.%N)
  printf '  run %s: %.3f s  (%s)\n' "$run" "$(echo "$end - $start" | bc)" "$(tail -1 "$work/out.txt")"
done
