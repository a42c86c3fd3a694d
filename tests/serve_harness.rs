//! Harness of the service tests: the real `planrun serve` binary on a
//! loopback port (port 0, the bound address read from its stdout), fake
//! Ollama/OpenAI servers on loopback, and record readers.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
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
        let mut command = Command::new(env!("CARGO_BIN_EXE_planrun"));
        command
            .current_dir(ROOT)
            .args(["serve", "--addr", "127.0.0.1:0", "--workspace"])
            .arg(sandbox.workspace())
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
        let mut child = command.spawn().expect("start planrun serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("read bound address");
        let Some(address) = line.trim().strip_prefix("listening on ") else {
            let mut stderr = String::new();
            let _ = child.stderr.take().map(|mut pipe| pipe.read_to_string(&mut stderr));
            panic!("serve did not start: stdout {line:?}, stderr {stderr}");
        };
        Server { base: address.to_string(), child, sandbox }
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
    /// filtered. A sealed state whose payload names a machine path
    /// (`agent_state_path`) has a digest that differs from machine to
    /// machine: it is checked against the real payload here, then shown as
    /// `[SHA256 OVER MACHINE PATHS]` so that the snapshot stays byte-stable.
    pub fn record(&self, run_id: &str, name: &str) -> String {
        let path = self.sandbox.workspace().join("bridge/runs").join(run_id).join(name);
        let raw = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("read {}: {error}", path.display()));
        let filtered = self.sandbox.filter(&raw);
        if filtered == raw || !name.ends_with("state.json") {
            return filtered;
        }
        let envelope: Value = serde_json::from_str(&raw).expect("a sealed state is JSON");
        let digest = sha256_hex(canonical_json(&envelope["payload"]).expect("canonical payload").as_bytes());
        assert_eq!(envelope["sha256"].as_str(), Some(digest.as_str()), "the seal of {} verifies", path.display());
        filtered.replace(&digest, "[SHA256 OVER MACHINE PATHS]")
    }

    pub fn exists(&self, relative: &str) -> bool {
        self.sandbox.workspace().join(relative).exists()
    }

    /// Snapshots `files` of a bridge or controller record as
    /// `snapshots/server/<name>@<file>`.
    pub fn snapshot_records(&self, name: &str, run_id: &str, files: &[&str]) {
        snapshot_settings("server").bind(|| {
            for file in files {
                insta::assert_snapshot!(format!("{name}@{file}"), self.record(run_id, file));
            }
        });
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client that never uses a proxy (traffic stays on loopback).
pub fn client() -> reqwest::Client {
    planrun::server::http_client::client_builder().no_proxy().timeout(Duration::from_secs(60)).build().expect("client")
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

/// How a fake model server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// `run_agent` on the first decision (`last_status: none`), else `stop`.
    Valid,
    /// Text that is not JSON.
    InvalidJson,
    /// A JSON answer cut off (and marked as hitting the token limit).
    Truncated,
    /// `{"action": "delete_everything"}`.
    WrongAction,
    /// Answers after two seconds.
    Slow,
    /// Answers validly after 800 ms (for in-flight tests).
    Delayed,
}

/// A fake Ollama and OpenAI-compatible server on loopback.
pub struct FakeModel {
    pub address: SocketAddr,
    /// Every request body received, in order.
    pub requests: Arc<Mutex<Vec<(String, Value)>>>,
}

#[derive(Clone)]
struct FakeState {
    behaviour: Behaviour,
    requests: Arc<Mutex<Vec<(String, Value)>>>,
}

impl FakeModel {
    pub async fn start(behaviour: Behaviour) -> FakeModel {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let state = FakeState { behaviour, requests: Arc::clone(&requests) };
        let app = axum::Router::new()
            .route("/api/tags", get(|| async { Json(json!({"models": [{"name": "qwen2.5:7b"}]})) }))
            .route("/api/generate", route_post(ollama_generate))
            .route("/v1/chat/completions", route_post(openai_chat))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeModel { address, requests }
    }

    pub fn ollama_host(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.address)
    }
}

/// The model's answer text and whether it hit the token limit.
async fn answer(state: &FakeState, path: &str, body: &Value, prompt: &str) -> (String, bool) {
    state.requests.lock().expect("lock").push((path.to_string(), body.clone()));
    let first = prompt.contains("last_status: none");
    match state.behaviour {
        Behaviour::Valid | Behaviour::Delayed => {
            if state.behaviour == Behaviour::Delayed {
                tokio::time::sleep(Duration::from_millis(800)).await;
            }
            let text = if first {
                "Here is the decision:\n```json\n{\"action\": \"run_agent\", \"goal\": \"test flow pwd to file\", \"reason\": \"the goal has not run yet\"}\n```"
            } else {
                "{\"action\": \"stop\", \"goal\": \"test flow pwd to file\", \"reason\": \"the last run is done\"}"
            };
            (text.to_string(), false)
        }
        Behaviour::InvalidJson => ("I would run the agent now.".to_string(), false),
        Behaviour::Truncated => ("{\"action\": \"run_agent\", \"goal\": \"test flow".to_string(), true),
        Behaviour::WrongAction => ("{\"action\": \"delete_everything\", \"goal\": \"x\"}".to_string(), false),
        Behaviour::Slow => {
            tokio::time::sleep(Duration::from_secs(2)).await;
            ("{\"action\": \"stop\", \"goal\": \"x\"}".to_string(), false)
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
    }))
}

async fn openai_chat(
    State(state): State<FakeState>,
    headers: axum::http::HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    let prompt = body["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .map(|message| message["content"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    let mut recorded = body.clone();
    recorded["authorization"] = json!(headers.get("authorization").and_then(|value| value.to_str().ok()));
    let (text, truncated) = answer(&state, "/v1/chat/completions", &recorded, &prompt).await;
    Json(json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": if truncated { "length" } else { "stop" }}],
    }))
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
