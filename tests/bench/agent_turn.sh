#!/usr/bin/env bash
# The runtime's own cost per agent turn, without the model's latency: a
# scripted model on loopback (python3) answers every request at once with a
# `ticket_lookup` proposal; an agent step runs TURNS turns (default 100,
# its max_turns) and then stops on its turn budget. The cost per turn is
# (time of the TURNS-turn run - time of a 1-turn run) / (TURNS - 1): the
# prompt, the model call over loopback, the sealed answer (a durable
# checkpoint), the look-up, the observation (a checkpoint). Never asserted
# in tests; the figure goes in docs/performance.md.
#
#   tests/bench/agent_turn.sh            # workspace in a temporary folder
#   TMPDIR=/dev/shm tests/bench/agent_turn.sh   # without the disk's fsync
set -euo pipefail
cd "$(dirname "$0")/../.."
turns=${1:-100}

cargo build --release --quiet
bin="${CARGO_TARGET_DIR:-$PWD/target}/release/planrun"
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

python3 - "$work/port" <<'PY' &
import http.server, json, sys
answer = json.dumps({"type": "action", "tool": "ticket_lookup", "arguments": {"ticket_id": "ticket-7"}})
body = json.dumps({"choices": [{"message": {"content": answer}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
open(sys.argv[1], "w").write(str(server.server_address[1]))
server.serve_forever()
PY
server=$!
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")

mkdir -p "$work/plans" "$work/policies"
cp policies/default.toml "$work/policies/"
cat > "$work/policies/bench.toml" <<POLICY
version = 1
extends = "default"
[budget]
max_tool_calls = 1000
max_steps = 10
[models.fake]
backend = "openai"
endpoint = "http://127.0.0.1:$port/v1"
model = "fake"
POLICY
plan() {
  cat > "$work/plans/agent_$1.toml" <<PLAN
version = 1
id = "agent_$1"
policy = "bench"
[[steps]]
id = "loop"
kind = "agent"
goal = "look ticket-7 up"
tools = ["ticket_lookup"]
model = "fake"
max_turns = $1
[[verify]]
kind = "ticket_status"
ticket_id = "ticket-7"
equals = "closed"
PLAN
}
plan 1
plan "$turns"

run() {
  local ws="$work/ws_$1_$2"
  mkdir -p "$ws"
  cp plans/ticket_close.tickets.json "$ws/tickets.json"
  local start end
  start=$(date +%s%N)
  "$bin" --quiet --workspace "$ws" --policies "$work/policies" --plan "$work/plans/agent_$1.toml" >/dev/null 2>&1 || true
  end=$(date +%s%N)
  echo $(( (end - start) / 1000 ))
}

best_one=999999999; best_many=999999999
for round in 1 2 3 4 5; do
  one=$(run 1 "$round"); many=$(run "$turns" "$round")
  [ "$one" -lt "$best_one" ] && best_one=$one
  [ "$many" -lt "$best_many" ] && best_many=$many
done
per_turn=$(( (best_many - best_one) / (turns - 1) ))
echo "agent turns: 1-turn run ${best_one} us, ${turns}-turn run ${best_many} us (best of 5)"
echo "runtime cost per turn: ${per_turn} us (target <= 2000 us), workspace under ${TMPDIR:-/tmp}"
