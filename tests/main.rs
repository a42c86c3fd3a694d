//! Integration tests: one binary, one module per area. To find the test of
//! a behaviour, find its row; to add a test, put it in the module whose row
//! names the behaviour (or add a module and a row). The harness is in
//! `common/`: a [`common::Sandbox`] per test and a fluent
//! `sandbox.planrun().args([..]).env(k, v).run()` per invocation.
//! Golden snapshots live in the top-level `snapshots/<area>/`.
//!
//! | module | what it covers | snapshots |
//! |---|---|---|
//! | `sandbox` | the Landlock sandbox around shell programs: the escape catalogue (writes outside the workspace, into `runs/` and `.planrun/`, reads outside the readable set, a loopback connection with the network off, `require_sandbox` on a simulated kernel without Landlock), the workspace, `TMPDIR` and an allowed network still usable, `extends` keeping the stricter sandbox, the spec never taken from the environment, the trampoline reading no option | |
//! | `scenarios` | every declared scenario (`plans/*.scenarios.toml\|yaml`, by `insta::glob!`): CLI output and every run file; every plan declares one | `runs/`, `bounded/` |
//! | `planrun_test` | `planrun test`: green on the repository, the Author's guide example as written, every mismatch with its diff, `--accept`, `--review`, new under `CI=true`, normalisation, bad scenario files, a `*.json` fixture that is not strict JSON, the `no-scenario` note | (sandbox copies only) |
//! | `snapshot_stability` | snapshots change only with behaviour: a comment in a policy or plan changes none, a finish message only the lines that show it (behaviour summary, `--format github` annotations, `--review` counts), `ls -la` stable as file times change, a tampered record failing verification though every placeholder matches | (sandbox copies only) |
//! | `ticket_store` | the demo ticket store under faults: injected transient look-up failures (`fail_next_lookups`) retried within budget (plain runs, the ticket demo, the verifier's look-up after the close), an unknown ticket `not_found` and never retried, a `tickets.json` that is not strict JSON (duplicate key, `NaN`, trailing data) failing by name | |
//! | `ticket_demo` | the ticket demo: pause for approval, approve and resume, already closed, untrusted ticket data, `planrun demo` | `bounded/` |
//! | `agent` | agent steps against a scripted model on loopback (the OpenAI protocol, requests counted): a benign run to a verified finish after approval, off-policy commands and paths outside the workspace refused with their rule and never run, too many refusals, a prompt injection in a ticket note frozen for a person (provenance shown) and rejected, `max_turns`, a finish without evidence, call and token budgets, ask → `planrun answer` → continue, crashes before and after a turn's effect (one effect, no second model call), a server that refuses `json_schema` asked again with `json_object` (llama-cpp-python's server) | `runs/ticket_agent@*`, `bounded/agent_injection@*` |
//! | `replay` | `planrun replay`: an unchanged run identical (exit 0); a policy edit that denies a recorded shell step, a rule that now says `prompt` or a step that requires approval, a changed template (rendered differently), removed and new steps, a goal that now routes elsewhere (exit 1, the step and rule named); agent turns against the scripted model's recorded answers (the model asked nothing, a denied or prompting turn named); a canary proving nothing runs or is written; `--json`; a run copied as files into another workspace; bad input (exit 2) | |
//! | `agent_tls` | an agent step's model behind `https://`: real TLS to a loopback server with a certificate from a CA made by `openssl`, trusted through `ca_file`; another CA or the system roots refused before any request (no answer recorded); `ca_file` on `http://` refused by `check`; an unreadable `ca_file` | |
//! | `agent_http` | `[[http.allow]]` rule ids as agent tools: URLs outside the egress rules, a metadata address, a method or argument outside the schema refused with their rule and nothing sent (the fixture's log empty); an allowed GET's body is the next untrusted observation; a POST waits for approval (risk `write`) with nothing sent | |
//! | `agent_mcp` | pinned MCP tools (`SERVER.TOOL`) as agent tools: a call waits for approval (risk `write`), then runs once (the fixture's call log) and its content is the next untrusted observation; arguments outside the input schema and a changed definition refused with nothing called; an undeclared `SERVER.TOOL` refused at load with its position | |
//! | `approvals` | approval matching (fingerprint, scope, state version), expiry, forged approvals, `decision = "prompt"`, changed plans, `reject`, `cancel` | `bounded/rejected@*` |
//! | `crash_start` | `SIGKILL` (through `strace`) at every `rename` of a run: before its first checkpoint the id is free and every command says so alike; after it the run resumes to `done` or is cancelled | |
//! | `crash_points` | the crash harness: `SIGKILL` (through `strace`) at every persistence syscall of a run, an approval and a resume (the ticket demo, its resume under the key, a keyed write, a plain run), then recovery: never stuck, no keyed effect twice, ≥ 95 % of the ticket demo's resume kill points `done` through the ticket store's receipt | |
//! | `tamper` | every record file edited, removed, re-ordered, appended, with and without the key: `verify`, `show`, `resume` refuse it (exit 2); the issue-8 attacks on a waiting ticket run; a crash tail never trusted; an unreadable or missing record file gets exit 2 from every command; `verify`'s exit codes | |
//! | `tamper_matrix` | every record file found in a run folder and every receipt edited, given a duplicate key, line-removed, re-ordered, appended, emptied, deleted (a receipt re-sealed), with and without the key, on a run whose `resume` would close a ticket: refused by `verify`, `show`, `resume` alike (exit 2, nothing runs) or an appended crash tail never shown; the ticket system's receipts changed after a crash never close twice under the key; a head line with a duplicate `ticket_id` re-sealed without the key refused (strict JSON), the ticket stays open | |
//! | `pg_approvals` | approvals across nodes on PostgreSQL: two `serve` nodes on one workspace (approved on B, both agree; concurrent approvals, one wins), CLI approve + `worker --once`, expired (database time), mismatched or deleted `approvals` rows refused, rejections, a dead holder's use taken over by the next lease | |
//! | `pg_faults` | database faults on a private cluster per test: TLS `sslmode`s with a CA made by `openssl` (right and wrong CA and host name), `pg_ctl restart -m immediate` and `pg_terminate_backend` while a worker drives runs (done, each close once, verified), a session ended inside the COMMIT after a keyed close (read back, recovered from the receipt), a worker started with the database down | |
//! | `pg_store` | the PostgreSQL store with the real binary (`--store postgres://…`, a schema per test on `PLANRUN_TEST_PG`): flow_pwd and the ticket demo, `export` equal to the file-store twin and verified by it, `store migrate` twice, unmigrated or newer schemas, bad and unreachable URLs, tampered rows, a receipt the database cannot give (never judged), a controller run cut off mid-loop ended by the next node, a run of another workspace (its own `.planrun/id`) never listed, decided, resumed or cancelled from there but read and verified by id | |
//! | `pg_fencing` | fencing on PostgreSQL with real processes: a holder `SIGSTOP`ped past its lease has its tool killed by its tool guard at its local deadline while still frozen, before a worker takes the run over (nothing left to stop), and writes nothing after `SIGCONT` and exits 1 (lease lost); a run that kills every holder ends `recovery_exhausted` after `PLANRUN_MAX_CLAIMS` takeovers while another run flows (each killed worker's tool dies with it: the tool guard); holders killed at each step boundary and inside the effect window (ticket demo, keyed write) recovered by `worker --once`, every keyed effect once | |
//! | `pg_queue` | queued runs on the PostgreSQL store: `--queue` (id printed, nothing runs), `show`/`runs`/`verify`/`cancel` of a queued run, a worker starts it with the direct run's records (export equal to the file-store twin), a dead claimer's run claimed again after its lease, the file store refusing `--queue`, workspace ids (`.planrun/id`) deciding what a worker claims, 4 worker processes draining 200 queued runs exactly once; `POST /runs` with `"wait": false` (202, `Location`, then a waited-for run's records; two nodes drive each accepted run once; a run left `queued` is driven by the scan; an interrupted bridge run waits for the agent run a worker continues, then ends `done`); SIGTERM stops a worker after the run it drives, its lease given back | |
//! | `integrity` | tampered `state.json` and `audit.jsonl` refused by every command; HMAC seals and no downgrade | |
//! | `effect_receipts` | receipts the effect vouches for: the ticket store's receipt of a keyed close, recovery asking it first, hand-written runtime receipts never standing in for it, conflicts, uncertain only where the effect cannot answer | |
//! | `sealed_receipts` | receipts sealed like checkpoints, named by the log's `receipt_link`; the earlier unsealed format read without a key, refused under one; a receipt swapped afterwards fails `verify` | |
//! | `idempotency` | receipts: crash after an effect, keyed writes reused or in conflict, uncertain outcomes, resume at the checkpoint | `bounded/crash_resume@*` |
//! | `budget_paths` | budgets on every path: the approved action of a paused run, its receipt look-up, the verifier's look-ups (kept in reserve from the first effect on); nothing over budget is applied | |
//! | `reconcile` | `planrun reconcile --applied\|--not-applied` settles a `tool_result_uncertain` run (audited, recorded), `resume` continues past it or runs it again; anything else refused | |
//! | `budgets` | `max_steps`, `max_tool_calls`, `max_run_secs`, plan budgets below the policy's, the deadline across a pause | |
//! | `failure_handling` | `on_failure = "continue"` (a real failing shell step read by a later step: `status`, `exit_code`, `stderr_text`, also after an approval and `resume`; `failed_steps` in the state, `show`, `runs`, the final line), the default `fail`, `max_consecutive_failures` across continued failures, a security denial never continued, `expect.exit_codes`, loader refusals with `file:line:column` | |
//! | `conditions` | `when`: every comparison (`equals`, `not_equals`, `contains`, `matches`, `lt`/`le`/`gt`/`ge`, `exists` on a missing `output_json` field) true and false, `all`/`any` (stopping early), a value that is not a number (`template_error`), `otherwise = "fail"` (exit 1, `condition_failed`, the message shown, no later step run), templated bounds (an input, a step's output, one that renders no number), the loader's refusals with `file:line:column` | |
//! | `completion` | `when` skips, `expect` (exit code, output), `verify` checks deciding `done` | |
//! | `story_invariants` | a re-sealed checkpoint whose story the plan could not produce (re-targeted frozen action, missing look-up, `done` without evidence, empty pending step) refused by `approve`/`resume` and alike by `verify`, `show` and `runs` (exit 2, the check named); an approval not bound to the frozen action; `approved_at <= now < expires_at` | |
//! | `syncs` | where a command-line run syncs (`strace -f`): once per step that may change the world, before the next one starts; the checkpoint after a read waits for the next sync; the end is synced. The service's bridge state files (`strace -p`): a stub request writes one, an agent request two | |
//! | `security` | every security boundary: denied, and nothing executed or created (a `search_path` inside the workspace included) | |
//! | `records` | run ids, never overwriting, atomic checkpoints, `show`, `--json` | `cli/show_retry_execution*` |
//! | `routing` | `route` explanations, ambiguity, Unicode | `cli/route_*` |
//! | `cli` | usage errors and exit codes, `check` on the repository and what it counts, the test clock, what the build says it can do (`--version`, `--help`) | `cli/usage_*`, `cli/check_repository` |
//! | `nesting_limit` | the parsers' nesting limit: a 10 000-level YAML and a deep TOML plan in `check`, a run, `list`, `--goal` (exit 2, never an abort) | |
//! | `check_catalog` | `check` of one file against the rest of the catalog, unresolvable template references refused before anything runs, the blocked-program hint, the broken-plan error every goal gets | |
//! | `diagnostics` | `check` output for each broken file in `tests/fixtures/broken/` (one snapshot per fixture, by `insta::glob!`) | `diagnostics/` |
//! | `preview` | `plan` previews; a preview executes and creates nothing | `preview/` |
//! | `inputs` | a plan's `[inputs.NAME]`: declarations refused with their position; values from `--input`, `--inputs FILE` and scenarios checked before anything runs (exit 2, no run, the canary absent); recorded, shown and read again on `resume`; a `path` input confined | |
//! | `step_settings` | a shell step's `cwd` (confined: absolute, `..`, symlinks, protected folders refused with nothing run; missing folders; the folder `pwd` shows) and `stdin` (rendered, reaching `cat`; over the cap refused before the program starts) | |
//! | `step_output` | what an attempt keeps of its program's output, failed or not: stdout and the end of stderr (`stderr_text`, the last 8 KiB) in the record and `show --full`, the output a failed `expect` refused, `{{ steps.<id>.stderr_text }}` in a later step and after `resume` | |
//! | `seeing_runs` | `runs` (newest first, `--status`, `--json`, a tampered run listed as unreadable, an empty workspace), `show --full`, `show latest`, the finish message, the run's last line naming its files | |
//! | `authoring` | `list`, `policy check`, `schema` (and the committed `schemas/`), `show` of documented runs | `cli/list`, `cli/policy_check_*`, `cli/show_*` |
//! | `layering` | the layering rule of `src/`: each top-level module's layer, imports only downwards, no cycle inside a folder, run-folder writes only in `store` (and the checker finds each kind of breach) | |
//! | `structure` | the shape of `src/` a newcomer relies on: no file over 700 lines but tests and key tables, no fact read or written by key (`details.insert(`, `stop_reason == Some("`) in the runtime and front ends, the control commands in `ops`, the service's use cases in `ops/service/` without axum, one store chooser (`store::open`), a `RunId` type, the layering check in `.ci/run`, no "seed" in `src/`, `docs/`, `README.md` | |
//! | `docs` | the reference in `docs/` names every subcommand, plan/policy/service policy key, exit code and `PLANRUN_*` variable | |
//! | `shell_completions` | `completions bash\|zsh\|fish` and `man` (stdout and `--out-dir`) name every subcommand | |
//! | `server` | `planrun serve` over loopback HTTP: bridge runs per adapter, guard, concurrency, shutdown, health, auth, errors, OpenAPI, startup checks | `server/` |
//! | `server_routing` | the service routes the user's goal as `planrun route` does (`POST /runs` with `agent`, `POST /controller/runs`), never the bridge instruction's wording; the agent run records the user's goal | |
//! | `server_controller` | `POST /controller/runs`: agent iterations, the one recovery rewrite (only to a plan the goal's plan declares in `recovery_plans`; a substitute's `done` never the run's), stop decisions, blocked goals | `server/controller_*` |
//! | `server_approvals` | `POST /runs/{id}/approve\|reject`: approval-gated bridge runs, refusals, auth | `server/` |
//! | `server_answer` | `POST /runs/{id}/answer`: a bridge run whose agent step asks waits `waiting_input` with its question (GET shows it), the answer resumes it to its end; refused answers (unknown run, not waiting, empty, blank, too long, wrong shape, no token) change nothing and never call the model; a controller stops `waiting_input`; an answer given with the CLI reads through | |
//! | `decision_backends` | Ollama/OpenAI decision backends against local fake servers: the schema sent, answers validated against the offered choices (prose and one fence around one object stripped and recorded, two objects refused), evidence, cancellation | `server/controller_ollama@*` |
//! | `controller_decisions` | the controller loop with misbehaving models: closed choices, no re-run after done, identical retries, start-up errors, the service policy's `[decision]` | |
//! | `server_contract` | the OpenAPI document matches the service: auth declared only with a token, JSON errors for every path, integers, refusals; a body that is not strict JSON (duplicate key, `NaN`, trailing data) is 400 `malformed_json` and creates no run | |
//! | `server_read_through` | a waiting bridge run whose agent run was approved, resumed, rejected or cancelled with the CLI shows the real status; HTTP decisions on it answer 409 | |
//! | `server_run_list` | `GET /runs?limit=&after=`: bridge runs newest first, paging, bad paging parameters (400 JSON), a tampered record listed as unreadable | |
//! | `server_records` | bridge and controller records: sealed, chained, refused when tampered | |
//! | `left_over_children` | a holder killed with `SIGKILL` while its shell child runs: `resume` and then `cancel` kill the child's process group before anything else (`child_stopped`), the note `runs/<id>/.child` is taken, the run verifies; the note names its step (`child_stopped` is logged at it, `show` prints the interruption, the resume and the stopped child in the timeline) and is gone once the child ends; on PostgreSQL the holder's tool guard kills its tool at once (a canary the tool would write later never appears; `resume` runs the step once more), and when the guard was killed too, the note (`.planrun/children/<id>`) lets a `cancel` after the lease expired do the same | |
//! | `service_durability` | `SIGKILL` of `serve` under concurrent stub and agent runs: after a restart every answered run reads back and verifies, nothing is unreadable, new runs are taken; a run cut off mid-drive (`PLANRUN_CRASH_AT`) is settled by the next service's scan (`run_interrupted` and `failed`, or its ended agent run's result), never sent to the adapter again | |
//! | `policy_extends` | `extends`: a child's rule for a program the parent blocks stays forbidden (canary absent), rules add up (a run uses both), budgets take the stricter value, cycle / missing parent / duplicate rule id diagnostics with positions, `policy check` and `check` naming each rule's origin, an edited parent refused by `approve` as a changed policy | |
//! | `retry_backoff` | the wait before each retry: exponential up to the policy's `max_ms` (a step's table over the policy's), the test clock moved on by each wait, the default `equal` jitter in range and the same for the same run, the real clock really waiting, `initial_ms = 0`, `extends` replacing the keys a child gives, loader refusals with positions | |
//! | `service_policy` | the service policy file on the common loader: TOML and YAML, findings with positions, `check` and `serve` | |
//! | `mcp` | `kind = "mcp"` steps against the fixture MCP server: a pinned tool called (its content the untrusted output), a changed description and arguments outside the schema refused with the call log absent, a crash, a hang, garbage, an answer too large and a tool error each with its own message, the server's secret found nowhere, unknown servers and tools and every server and step key refused at load with positions, `extends` merging servers, `planrun mcp pin` (review, `--write` keeping the file) | `mcp/` |
//! | `secrets` | `[secrets.NAME]` and a step's `env`: the loader's refusals (a secret outside `env`, an unknown secret, a name `shell.env_allow` does not list, a secret without exactly one source) with positions; a missing secret stops the run before anything (exit 2, the variable named); `from_file`; the policy's `shell.env` winning; the canary (environment printed, the value echoed raw and base64 to stdout and stderr and in the failure message) found nowhere under the sandbox, in the command line's or the service's output and answers, `verify` passing | |
//! | `http_steps` | `http` steps against a loopback server that logs every request: GET/POST with JSON, status sets, timeouts, size caps, redirects followed or refused and each hop judged, names resolving to private or metadata addresses, decimal/octal/IPv4-mapped hosts, userinfo, a rebinding name (the resolver stub `PLANRUN_TEST_RESOLVE`), percent-encoded templated paths, a secret in a header in no record (the canary search), the `Idempotency-Key` across a crash and resume, the loader's refusals with positions, `policy check --url`; every refusal with the server's log empty | |
//! | `http_proxy` | `http.proxy`: a GET through a logging proxy on loopback in absolute form (the proxy resolves the name), an `https` request as `CONNECT`, refused URLs and redirect hops leave the proxy's log empty, `HTTP_PROXY` and the other environment proxies never used (a canary proxy's log empty), bad proxy URLs refused at load with positions | |
//! | `http_bench` | the `http` benchmark (`tests/bench/http.sh`, ignored): a bare reqwest loop, the `http` tool in process, and whole runs of `GET`, `read_file`, `POST` and `flaky` steps as a marginal cost per step | |
//! | `sandbox_temp` | the sandbox's temporary folders, named after the process that made them: one left by a planrun killed with `SIGKILL` mid-step is removed by the next process that makes one, while a running planrun's stays; a folder whose process id now names a later process removed; folders of running processes, another pid namespace or user, links (their target untouched), files, inexact names and the names of earlier versions kept | |
//! | `sandbox_top` | the workspace's top level under the sandbox: files and folders created and removed at the top where a mount namespace can be made, while `runs/`, `bridge/`, `.planrun/` stay unwritable and unlisted and `.git` read-only (canaries absent, `verify` passing); a planted `.git` failing its step and removed; the top level read-only with the reason recorded where no namespace can be made (simulated); the trampoline's user-namespace way | |
//! | `serve_harness` | the service test harness (server process, fake model servers) | |
//! | `common` | the harness: `Sandbox`, the `Planrun` builder, the ticket demo's sandbox (`common::tickets`) | |

mod common;
mod serve_harness;

mod agent;
mod agent_http;
mod agent_mcp;
mod agent_tls;
mod approvals;
mod authoring;
mod budget_paths;
mod budgets;
mod check_catalog;
mod cli;
mod completion;
mod conditions;
mod controller_decisions;
mod crash_points;
mod crash_start;
mod decision_backends;
mod diagnostics;
mod docs;
mod effect_receipts;
mod failure_handling;
mod http_bench;
mod http_proxy;
mod http_steps;
mod idempotency;
mod inputs;
mod integrity;
mod layering;
mod left_over_children;
mod mcp;
mod nesting_limit;
#[cfg(feature = "postgres")]
mod pg_approvals;
#[cfg(feature = "postgres")]
mod pg_faults;
#[cfg(feature = "postgres")]
mod pg_fencing;
#[cfg(feature = "postgres")]
mod pg_queue;
#[cfg(feature = "postgres")]
mod pg_store;
mod planrun_test;
mod policy_extends;
mod preview;
mod reconcile;
mod records;
mod replay;
mod retry_backoff;
mod routing;
mod sandbox;
mod sandbox_temp;
mod sandbox_top;
mod scenarios;
mod sealed_receipts;
mod secrets;
mod security;
mod seeing_runs;
mod server;
mod server_answer;
mod server_approvals;
mod server_contract;
mod server_controller;
mod server_read_through;
mod server_records;
mod server_routing;
mod server_run_list;
mod service_durability;
mod service_policy;
mod shell_completions;
mod snapshot_stability;
mod step_output;
mod step_settings;
mod story_invariants;
mod structure;
mod syncs;
mod tamper;
mod tamper_matrix;
mod ticket_demo;
mod ticket_store;
