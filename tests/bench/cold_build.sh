#!/usr/bin/env bash
# Cold build times of one commit (issue: faster cold builds), never asserted
# in tests. Each measurement starts from an empty target folder in a fresh
# worktree of the commit; the crates.io downloads are cached, so the figures
# are compile time only. Run it on an otherwise idle machine.
#
#   tests/bench/cold_build.sh COMMIT [all|build|test|ci]
#
# The test builds are those of CI: with the `postgres` feature.
#
# build: cold `cargo build --release`, then `cargo test --release --no-run`
#        in the same target (lists every crate compiled again: what the test
#        build shares with the run command's build)
# test:  build, then a cold `cargo test` (debug)
# ci:    build, then a cold `.ci/run`
# all:   build, `cargo test` and `.ci/run`
#
# Prints wall seconds and CPU seconds (user + sys) per command.
set -euo pipefail
cd "$(dirname "$0")/../.."
commit=${1:?usage: cold_build.sh COMMIT [all|build|test|ci]}
what=${2:-all}
root=$(mktemp -d /tmp/planrun-cold.XXXXXX)
git worktree add --detach --quiet "$root/tree" "$commit"
trap 'git worktree remove --force "$root/tree"; rm -rf "$root"/target-* "$root/tree"' EXIT

# measure NAME CMD...: one cold command, its own empty target unless
# CARGO_TARGET_DIR is set by the caller.
measure() {
  local name=$1; shift
  local t0 t1 file=${name//[^A-Za-z0-9]/_}
  local log="$root/$file.log"
  t0=$(date +%s.%N)
  /usr/bin/env time -f '%U %S' -o "$root/$file.cpu" "$@" >"$log" 2>&1 || echo "  ($name exited non-zero; log kept: $log)"
  t1=$(date +%s.%N)
  read -r user sys <"$root/$file.cpu"
  printf '%-34s wall %6.0f s   cpu %6.0f s (user %.0f + sys %.0f)\n' "$name" \
    "$(echo "$t1 - $t0" | bc)" "$(echo "$user + $sys" | bc)" "$user" "$sys"
}

cd "$root/tree"
echo "commit $(git log --oneline -1 | cut -c1-72)"
export CARGO_TARGET_DIR="$root/target-release"
measure "cargo build --release" cargo build --release --locked
measure "then cargo test --release --no-run" cargo test --release --locked --features postgres --no-run
echo "  crates the test build compiled again: $(grep -Eo 'Compiling [a-z0-9_-]+' "$root/then_cargo_test___release___no_run.log" | awk '{print $2}' | sort | tr '\n' ' ')"
if [ "$what" = all ] || [ "$what" = test ]; then
  export CARGO_TARGET_DIR="$root/target-debug"
  measure "cargo test" env CI=true cargo test --locked --features postgres
fi
if [ "$what" = all ] || [ "$what" = ci ]; then
  unset CARGO_TARGET_DIR
  rm -rf target
  measure ".ci/run" .ci/run
fi
