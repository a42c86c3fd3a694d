//! A scripted model on loopback: an OpenAI-compatible chat-completions
//! server (and, on `/api/chat`, Ollama's chat API) that answers each
//! request with the next answer of a script (the last one again once the
//! script is used up). `planrun test` serves a
//! scenario's `model_answers` with it, so agent plans get golden snapshots;
//! the test suite drives agent steps with it and counts its requests.
//!
//! Each answer reports 100 prompt tokens and 20 answer tokens, so token
//! budgets are testable and snapshots stable.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// Prompt tokens the scripted model reports per answer.
pub const SCRIPTED_TOKENS_IN: u64 = 100;
/// Answer tokens the scripted model reports per answer.
pub const SCRIPTED_TOKENS_OUT: u64 = 20;

/// A running scripted model (its thread serves until the process ends).
pub struct ScriptedModel {
    port: u16,
    requests: Arc<AtomicUsize>,
    /// Every request received, in order.
    received: Arc<Mutex<Vec<Request>>>,
}

impl ScriptedModel {
    /// Serves `answers` (each the text of one answer) on a free loopback port.
    pub fn start(answers: Vec<String>) -> std::io::Result<ScriptedModel> {
        Self::serve(answers, false)
    }

    /// Serves `answers` as [`start`](Self::start) does, but refuses a
    /// request with `response_format.type = "json_schema"` with HTTP 422,
    /// as llama-cpp-python's server does (it knows only `json_object`).
    /// A refused request is kept in [`bodies`](Self::bodies) and is not
    /// counted in [`requests`](Self::requests).
    pub fn start_refusing_json_schema(answers: Vec<String>) -> std::io::Result<ScriptedModel> {
        Self::serve(answers, true)
    }

    fn serve(answers: Vec<String>, refuse_json_schema: bool) -> std::io::Result<ScriptedModel> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let requests = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (counter, kept) = (Arc::clone(&requests), Arc::clone(&received));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let Some(request) = read_request(&mut stream) else { continue };
                let refused =
                    refuse_json_schema && request.body.pointer("/response_format/type") == Some(&json!("json_schema"));
                let ollama = request.ollama;
                if let Ok(mut kept) = kept.lock() {
                    kept.push(request);
                }
                if refused {
                    let _ = stream.write_all(refusal().as_bytes());
                    continue;
                }
                let index = counter.fetch_add(1, Ordering::SeqCst);
                let answer = answers.get(index).or(answers.last()).cloned().unwrap_or_default();
                let reply = if ollama { ollama_reply(&answer) } else { reply(index, &answer) };
                let _ = stream.write_all(reply.as_bytes());
            }
        });
        Ok(ScriptedModel { port, requests, received })
    }

    /// `http://127.0.0.1:PORT/v1`: what `PLANRUN_MODEL_ENDPOINT` is set to.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// `http://127.0.0.1:PORT`: an Ollama profile's `endpoint` (its chat
    /// API is `/api/chat` under it).
    pub fn root(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Requests answered so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// The request bodies, in order.
    pub fn bodies(&self) -> Vec<Value> {
        self.received
            .lock()
            .map(|received| received.iter().map(|request| request.body.clone()).collect())
            .unwrap_or_default()
    }

    /// The bearer token of each request (`Authorization: Bearer …`), in
    /// order; `None` for a request without one.
    pub fn bearers(&self) -> Vec<Option<String>> {
        self.received
            .lock()
            .map(|received| received.iter().map(|request| request.bearer.clone()).collect())
            .unwrap_or_default()
    }
}

fn reply(index: usize, answer: &str) -> String {
    let body = json!({
        "id": format!("scripted-{index}"),
        "object": "chat.completion",
        "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": SCRIPTED_TOKENS_IN,
            "completion_tokens": SCRIPTED_TOKENS_OUT,
            "total_tokens": SCRIPTED_TOKENS_IN + SCRIPTED_TOKENS_OUT,
        },
    })
    .to_string();
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Ollama's `/api/chat` answer (`stream: false`).
fn ollama_reply(answer: &str) -> String {
    let body = json!({
        "model": "scripted",
        "message": {"role": "assistant", "content": answer},
        "done": true,
        "done_reason": "stop",
        "prompt_eval_count": SCRIPTED_TOKENS_IN,
        "eval_count": SCRIPTED_TOKENS_OUT,
    })
    .to_string();
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// llama-cpp-python's answer to a `response_format` it does not know.
fn refusal() -> String {
    let body = json!({"detail": [{"type": "literal_error", "loc": ["body", "response_format", "type"],
        "msg": "Input should be 'text' or 'json_object'"}]})
    .to_string();
    format!(
        "HTTP/1.1 422 Unprocessable Entity\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// One request: its JSON body, its bearer token, and whether it went to
/// Ollama's `/api/chat`.
struct Request {
    body: Value,
    bearer: Option<String>,
    ollama: bool,
}

/// One request (`None` for anything but a JSON `POST`).
fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        let read = stream.read(&mut buffer).ok()?;
        if read == 0 || data.len() > 4 << 20 {
            return None;
        }
        data.extend_from_slice(&buffer[..read]);
        let Some(end) = data.windows(4).position(|window| window == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&data[..end]).to_string();
        let header = |name: &str| {
            head.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_string())
            })
        };
        let length: usize = header("content-length").and_then(|value| value.parse().ok()).unwrap_or(0);
        let bearer = header("authorization").and_then(|value| value.strip_prefix("Bearer ").map(str::to_string));
        let ollama = head.lines().next().is_some_and(|line| line.split(' ').nth(1) == Some("/api/chat"));
        if data.len() >= end + 4 + length {
            let body = serde_json::from_slice(&data[end + 4..end + 4 + length]).ok()?;
            return Some(Request { body, bearer, ollama });
        }
    }
}
