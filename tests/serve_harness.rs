//! Harness of the service tests: the real `planrun serve` binary on a
//! loopback port (port 0, the bound address read from its stdout), fake
//! Ollama/OpenAI servers on loopback, and record readers.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::routing::{get, post as route_post};
use planrun::store::canonical::{canonical_json, sha256_hex};
use serde_json::{Value, json};

use crate::common::planrun::CLEARED;
use crate::common::{ROOT, Sandbox, TEST_CLOCK, snapshot_settings};

/// A running `planrun serve`, killed on drop.
pub struct Server {
    pub child: Child,
    pub base: String,
    pub sandbox: Sandbox,
}

impl Server {
    /// Starts the service on `127.0.0.1:0` with the stub decision backend,
    /// an unreachable Ollama and no OpenAI key, then `envs` on top.
    pub fn start(envs: &[(&str, &str)]) -> Server {
        Self::start_in(Sandbox::new(), envs)
    }

    /// Starts the service on a sandbox the test has prepared (for example
    /// with files in its workspace).
    pub fn start_in(sandbox: Sandbox, envs: &[(&str, &str)]) -> Server {
        Self::start_in_with(sandbox, envs, &[])
    }

    /// As [`Server::start_in`], with more `serve` arguments (for example
    /// `--service-policy FILE`).
    pub fn start_in_with(sandbox: Sandbox, envs: &[(&str, &str)], args: &[&str]) -> Server {
        let (child, base) = spawn_serve(&sandbox, envs, args);
        Server { base, child, sandbox }
    }

    /// Another `planrun serve` on this server's workspace (with a shared
    /// store: a second node), with `envs` and `args` of its own.
    pub fn another_node(&self, envs: &[(&str, &str)], args: &[&str]) -> Node {
        let (child, base) = spawn_serve(&self.sandbox, envs, args);
        Node { child, base }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends SIGTERM and waits for the process.
    pub fn terminate(&mut self) -> ExitStatus {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).expect("pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("send SIGTERM");
        self.child.wait().expect("wait for serve")
    }

    /// A file of a bridge or controller record folder, machine paths
    /// filtered. A sealed state's seal is checked against its real payload
    /// here (a payload that names a machine path, `agent_state_path`, has a
    /// digest that differs from machine to machine).
    pub fn record(&self, run_id: &str, name: &str) -> String {
        let path = self.sandbox.workspace().join("bridge/runs").join(run_id).join(name);
        let raw = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("read {}: {error}", path.display()));
        if name.ends_with("state.json") {
            let envelope: Value = serde_json::from_str(&raw).expect("a sealed state is JSON");
            let digest = sha256_hex(canonical_json(&envelope["payload"]).expect("canonical payload").as_bytes());
            assert_eq!(envelope["sha256"].as_str(), Some(digest.as_str()), "the seal of {} verifies", path.display());
        }
        self.sandbox.filter(&raw)
    }

    /// A record file as its snapshot shows it, as `planrun test` shows a
    /// run's: line by line, digests as placeholders (`[hash-1]`).
    pub fn record_snapshot(&self, run_id: &str, name: &str) -> String {
        planrun::snapshot::hash_placeholders(&planrun::snapshot::render_record(name, &self.record(run_id, name)))
    }

    pub fn exists(&self, relative: &str) -> bool {
        self.sandbox.workspace().join(relative).exists()
    }

    /// Snapshots `files` of a bridge or controller record as
    /// `snapshots/server/<name>@<file>`.
    pub fn snapshot_records(&self, name: &str, run_id: &str, files: &[&str]) {
        snapshot_settings("server").bind(|| {
            for file in files {
                insta::assert_snapshot!(format!("{name}@{file}"), self.record_snapshot(run_id, file));
            }
        });
    }
}

impl Server {
    /// Polls `GET path` (every 20 ms, 30 s at most; every answer must be
    /// 200) until the body's `status` is no longer `from`, as the scan of
    /// a restarted service settles a record; that body.
    pub async fn settled(&self, path: &str, from: &str) -> Value {
        let client = client();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (status, body) = get_json(&client, &self.url(path)).await;
            assert_eq!(status, 200, "{path}: {body}");
            if body["status"] != from {
                return body;
            }
            assert!(tokio::time::Instant::now() < deadline, "{path} never left `{from}`: {body}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends `body` to `path` on a server started to abort inside that
    /// request (`PLANRUN_CRASH_AT`): asserts that no answer came and that
    /// the process failed; returns its sandbox, the workspace as the abort
    /// left it, for the next server.
    pub async fn aborted_during(mut self, path: &str, body: &Value) -> Sandbox {
        let sent = client().post(self.url(path)).json(body).send().await;
        assert!(sent.is_err(), "no answer: the service aborted");
        assert!(!self.child.wait().expect("reap planrun serve").success());
        std::mem::replace(&mut self.sandbox, Sandbox::new())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A second `planrun serve` on a [`Server`]'s workspace, killed on drop.
pub struct Node {
    pub child: Child,
    pub base: String,
}

impl Node {
    /// A `planrun serve` on `sandbox`'s workspace before any [`Server`]
    /// owns the sandbox (a node that dies first, say); killed when dropped.
    pub fn start(sandbox: &Sandbox, envs: &[(&str, &str)], args: &[&str]) -> Node {
        let (child, base) = spawn_serve(sandbox, envs, args);
        Node { child, base }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `planrun serve` (see [`serve_command`]) and reads the address it
/// bound.
fn spawn_serve(sandbox: &Sandbox, envs: &[(&str, &str)], args: &[&str]) -> (Child, String) {
    let mut command = serve_command(sandbox, envs, args);
    let mut child = command.spawn().expect("start planrun serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("read bound address");
    let Some(address) = line.trim().strip_prefix("listening on ") else {
        let mut stderr = String::new();
        let _ = child.stderr.take().map(|mut pipe| pipe.read_to_string(&mut stderr));
        panic!("serve did not start: stdout {line:?}, stderr {stderr}");
    };
    (child, address.to_string())
}

/// A client that never uses a proxy (traffic stays on loopback).
/// `planrun serve` on a free loopback port with `sandbox`'s workspace, the
/// test clock, the stub decision backend and no Ollama, the caller's
/// variables cleared and `envs` set last (they win); stdin null, stdout and
/// stderr piped.
pub fn serve_command(sandbox: &Sandbox, envs: &[(&str, &str)], args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_planrun"));
    command
        .current_dir(ROOT)
        .args(["serve", "--addr", "127.0.0.1:0", "--workspace"])
        .arg(sandbox.workspace())
        .args(args)
        .env("PLANRUN_TEST_CLOCK", TEST_CLOCK)
        .env("NO_COLOR", "1")
        .env("PLANRUN_DECISION_BACKEND", "stub")
        .env("OLLAMA_HOST", "http://127.0.0.1:1")
        .env("PLANRUN_PROBE_TIMEOUT_MS", "300")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("PLANRUN_API_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for key in CLEARED {
        command.env_remove(key);
    }
    for (key, value) in envs {
        command.env(key, value);
    }
    command
}

/// The ticket demo on the service: a server whose workspace holds the
/// demo's `tickets.json` before it starts.
pub fn start_with_tickets(envs: &[(&str, &str)]) -> Server {
    let sandbox = Sandbox::new();
    let tickets =
        std::fs::read_to_string(Path::new(ROOT).join("plans/ticket_close.tickets.json")).expect("sample tickets");
    sandbox.write("workspace/tickets.json", &tickets);
    Server::start_in(sandbox, envs)
}

/// How many times ticket-7 was really closed in the server's workspace.
pub fn close_count(server: &Server) -> u64 {
    let text = std::fs::read_to_string(server.sandbox.workspace().join("tickets.json")).expect("tickets");
    let tickets: Value = serde_json::from_str(&text).expect("tickets JSON");
    tickets["tickets"]["ticket-7"]["close_count"].as_u64().expect("close_count")
}

/// The `event_type`s of bridge or controller record `run_id`, in order.
pub fn audit_events(server: &Server, run_id: &str) -> Vec<String> {
    server
        .record(run_id, "audit.jsonl")
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).expect("JSON")["event_type"].as_str().expect("type").to_string()
        })
        .collect()
}

pub fn client() -> reqwest::Client {
    planrun::ops::service::http_client::client_builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
}

/// Sends a request that must fail; returns its status and the `error.code`
/// of its JSON body.
pub async fn error_code(request: reqwest::RequestBuilder) -> (u16, String) {
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    let body: Value = response.json().await.expect("JSON error body");
    (status, body["error"]["code"].as_str().unwrap_or_default().to_string())
}

/// POSTs JSON; returns status and JSON body.
pub async fn post(client: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let response = client.post(url).json(&body).send().await.expect("send");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON body"))
}

pub async fn get_json(client: &reqwest::Client, url: &str) -> (u16, Value) {
    let response = client.get(url).send().await.expect("send");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON body"))
}

/// How a fake model server answers. Every fake reads the offered plan from
/// the prompt's options, as a model would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// `run_plan` with the offered plan before the first run, else `stop`.
    Valid,
    /// Text that is not JSON.
    InvalidJson,
    /// A JSON answer cut off (and marked as hitting the token limit).
    Truncated,
    /// `{"action": "delete_everything"}`.
    WrongAction,
    /// The old prompt's own template, placeholders and all.
    Placeholder,
    /// The decision schema itself, echoed back.
    SchemaEcho,
    /// A valid decision with prose around it.
    Prose,
    /// A valid decision in a markdown fence, with prose before and after.
    FencedProse,
    /// Two JSON objects: the schema echoed, then a valid decision.
    TwoObjects,
    /// `run_plan` with `fallback`, a plan that is never offered here.
    ForeignPlan,
    /// `run_plan` with the offered plan at every decision, even when only
    /// `stop` is offered (after a verified done).
    AlwaysRun,
    /// Answers after five seconds (the caller must cancel; the fake counts
    /// handlers dropped before they answered).
    Slow,
    /// Answers validly after 800 ms (for in-flight tests).
    Delayed,
    /// HTTP 400 for `response_format.type = json_schema`, valid otherwise
    /// (a server without JSON Schema support).
    RefuseJsonSchema,
}

/// A fake Ollama and OpenAI-compatible server on loopback.
pub struct FakeModel {
    pub address: SocketAddr,
    /// Every request body received, in order.
    pub requests: Arc<Mutex<Vec<(String, Value)>>>,
    /// Requests whose handler was dropped before answering (the client
    /// closed the connection).
    pub cancelled: Arc<AtomicUsize>,
}

#[derive(Clone)]
struct FakeState {
    behaviour: Behaviour,
    requests: Arc<Mutex<Vec<(String, Value)>>>,
    cancelled: Arc<AtomicUsize>,
}

impl FakeModel {
    pub async fn start(behaviour: Behaviour) -> FakeModel {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let cancelled = Arc::new(AtomicUsize::new(0));
        let state = FakeState { behaviour, requests: Arc::clone(&requests), cancelled: Arc::clone(&cancelled) };
        let app = axum::Router::new()
            .route("/api/tags", get(|| async { Json(json!({"models": [{"name": "qwen2.5:7b"}]})) }))
            .route("/api/generate", route_post(ollama_generate))
            .route("/v1/models", get(|| async { Json(json!({"object": "list", "data": [{"id": "gpt-test"}]})) }))
            .route("/v1/chat/completions", route_post(openai_chat))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeModel { address, requests, cancelled }
    }

    pub fn ollama_host(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// The request bodies received so far.
    pub fn bodies(&self) -> Vec<Value> {
        self.requests.lock().expect("lock").iter().map(|(_, body)| body.clone()).collect()
    }
}

/// Counts a handler dropped before it answered.
struct DropGuard {
    cancelled: Arc<AtomicUsize>,
    answered: bool,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.answered {
            self.cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The plan the prompt offers with `run_plan`, if any.
fn offered_plan(prompt: &str) -> Option<String> {
    let marker = "{\"action\": \"run_plan\", \"plan_id\": \"";
    let start = prompt.find(marker)? + marker.len();
    let end = prompt[start..].find('"')?;
    Some(prompt[start..start + end].to_string())
}

/// The model's answer text and whether it hit the token limit.
async fn answer(state: &FakeState, path: &str, body: &Value, prompt: &str) -> (String, bool) {
    state.requests.lock().expect("lock").push((path.to_string(), body.clone()));
    let plan = offered_plan(prompt);
    let first = prompt.contains("\"last_run\": null");
    let valid = || match &plan {
        Some(plan) if first => {
            format!(r#"{{"action": "run_plan", "plan_id": "{plan}", "reason": "the goal has not run yet"}}"#)
        }
        _ => r#"{"action": "stop", "plan_id": null, "reason": "the last run is done"}"#.to_string(),
    };
    match state.behaviour {
        Behaviour::Valid | Behaviour::RefuseJsonSchema => (valid(), false),
        Behaviour::Delayed => {
            tokio::time::sleep(Duration::from_millis(800)).await;
            (valid(), false)
        }
        Behaviour::InvalidJson => ("I would run the agent now.".to_string(), false),
        Behaviour::Truncated => (r#"{"action": "run_plan", "plan_id": "flow"#.to_string(), true),
        Behaviour::WrongAction => (r#"{"action": "delete_everything", "plan_id": null, "reason": "x"}"#.to_string(), false),
        Behaviour::Placeholder => (
            r#"{"action": "run_agent", "goal": "<goal for the agent, at most 500 characters>", "reason": "<short reason>"}"#
                .to_string(),
            false,
        ),
        Behaviour::SchemaEcho => {
            let schema = body.pointer("/response_format/json_schema/schema").or_else(|| body.get("format"));
            (schema.map(Value::to_string).unwrap_or_default(), false)
        }
        Behaviour::Prose => (format!("Sure! Here is my decision: {} Hope this helps.", valid()), false),
        Behaviour::FencedProse => (format!("Here it is:\n```json\n{}\n```\nDone.", valid()), false),
        Behaviour::TwoObjects => (format!("{{\"type\": \"object\"}}\n{}", valid()), false),
        Behaviour::ForeignPlan => (r#"{"action": "run_plan", "plan_id": "fallback", "reason": "catch-all"}"#.to_string(), false),
        Behaviour::AlwaysRun => {
            let plan = plan.unwrap_or_else(|| "flow_pwd".to_string());
            (format!(r#"{{"action": "run_plan", "plan_id": "{plan}", "reason": "once more"}}"#), false)
        }
        Behaviour::Slow => {
            let mut guard = DropGuard { cancelled: Arc::clone(&state.cancelled), answered: false };
            tokio::time::sleep(Duration::from_secs(5)).await;
            guard.answered = true;
            (r#"{"action": "stop", "plan_id": null, "reason": "late"}"#.to_string(), false)
        }
    }
}

async fn ollama_generate(State(state): State<FakeState>, Json(body): Json<Value>) -> Json<Value> {
    let prompt = body["prompt"].as_str().unwrap_or_default().to_string();
    let (text, truncated) = answer(&state, "/api/generate", &body, &prompt).await;
    Json(json!({
        "model": body["model"],
        "response": text,
        "done": true,
        "done_reason": if truncated { "length" } else { "stop" },
        "prompt_eval_count": 120,
        "eval_count": 20,
    }))
}

async fn openai_chat(
    State(state): State<FakeState>,
    headers: axum::http::HeaderMap,
    Json(body): Json<Value>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let prompt = body["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .map(|message| message["content"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    let mut recorded = body.clone();
    recorded["authorization"] = json!(headers.get("authorization").and_then(|value| value.to_str().ok()));
    if state.behaviour == Behaviour::RefuseJsonSchema && body["response_format"]["type"] == "json_schema" {
        state.requests.lock().expect("lock").push(("/v1/chat/completions".to_string(), recorded));
        let error = json!({"error": {"message": "response_format json_schema is not supported"}});
        return (axum::http::StatusCode::BAD_REQUEST, Json(error)).into_response();
    }
    let (text, truncated) = answer(&state, "/v1/chat/completions", &recorded, &prompt).await;
    Json(json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": if truncated { "length" } else { "stop" }}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 20, "total_tokens": 140},
    }))
    .into_response()
}

/// A loopback port with nothing listening.
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

/// Reads the whole file below the workspace.
pub fn read(workspace: &Path, relative: &str) -> String {
    std::fs::read_to_string(workspace.join(relative)).unwrap_or_else(|error| panic!("read {relative}: {error}"))
}
