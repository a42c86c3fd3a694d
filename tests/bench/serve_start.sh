# Shared by serve.sh and wrk.sh (sourced, not run): the release build and a
# `planrun serve` on a loopback port with a fresh workspace.

# release_bin: sets PLANRUN_BIN, building the release binary unless it is set.
release_bin() {
  if [ -z "${PLANRUN_BIN:-}" ]; then
    cargo build --release --quiet
    PLANRUN_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/planrun"
  fi
}

# start_serve WORK: starts `$PLANRUN_BIN serve` on 127.0.0.1:0 with the
# workspace WORK/workspace (stub decision backend, no model servers); sets
# server_pid and base (http://127.0.0.1:PORT). The caller's EXIT trap stops it.
start_serve() {
  local work=$1
  PLANRUN_DECISION_BACKEND=stub OLLAMA_HOST=http://127.0.0.1:1 PLANRUN_PROBE_TIMEOUT_MS=200 \
    "$PLANRUN_BIN" serve --addr 127.0.0.1:0 --workspace "$work/workspace" >"$work/serve.out" 2>"$work/serve.err" &
  server_pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
  base=$(sed -n 's/^listening on //p' "$work/serve.out")
  [ -n "$base" ] || { cat "$work/serve.err" >&2; exit 1; }
}
