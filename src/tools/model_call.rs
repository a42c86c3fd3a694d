//! One call to a model, as an agent step makes it: a blocking HTTP/1.1
//! `POST` over plain TCP for an `http://` endpoint (a local server), or
//! over TLS for an `https://` one (`model_tls.rs`), in
//! one of the two protocols the controller also speaks (see
//! `ops/service/decision/`): OpenAI-compatible chat completions with a
//! JSON Schema `response_format`, or Ollama's `/api/chat` with `format`.
//!
//! The whole call (connect, send, read) keeps within the profile's
//! timeout; the answer is read up to [`MAX_RESPONSE_BYTES`]. Nothing here
//! decides anything: the caller validates the answer.
//!
//! An OpenAI-compatible server that refuses `response_format: json_schema`
//! (HTTP 400, 422, 500 or 501: llama-cpp-python's server knows only
//! `json_object`) is asked again, within the same timeout, with
//! `{"type": "json_object", "schema": …}` — the same schema, in the slot
//! llama-cpp-python turns into a grammar — as the controller does; the
//! reply says so ([`ModelReply::response_format`]).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::model::{ModelBackend, ModelProfile};
use crate::tools::model_tls::{self, TlsError, TlsPost};

/// The largest response body read from a model server.
pub const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// The schema's name in `response_format.json_schema`.
const SCHEMA_NAME: &str = "planrun_agent_turn";

/// The statuses by which a server refuses `response_format: json_schema`.
const SCHEMA_REFUSALS: [u16; 4] = [400, 422, 500, 501];

/// `response_format` as the call asked it when the server refused
/// `json_schema`.
pub const JSON_OBJECT: &str = "json_object";

/// What one call asks.
pub struct ModelRequest<'a> {
    pub profile: &'a ModelProfile,
    /// The bearer token, when the profile names a secret.
    pub api_key: Option<&'a str>,
    /// Trusted instructions (the system message).
    pub system: &'a str,
    /// The turn's prompt (goal, tools, transcript).
    pub prompt: &'a str,
    /// The JSON Schema of the answer.
    pub schema: &'a Value,
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelReply {
    /// The message content: the answer as text.
    pub text: String,
    pub finish_reason: Option<String>,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
    /// [`JSON_OBJECT`] when the server refused `json_schema` and answered
    /// when asked again with `json_object`; `None` otherwise.
    pub response_format: Option<&'static str>,
}

/// Why a call gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("model server unreachable: {0}")]
    Unreachable(String),
    #[error("model call timed out after {0} s")]
    Timeout(u64),
    #[error("model server answered http status {0}")]
    Status(u16),
    #[error("unexpected model response: {0}")]
    Protocol(String),
}

/// Asks the model once.
pub fn ask_model(request: &ModelRequest<'_>) -> Result<ModelReply, ModelError> {
    let profile = request.profile;
    let messages = json!([
        {"role": "system", "content": request.system},
        {"role": "user", "content": request.prompt},
    ]);
    let timeout = Duration::from_secs(profile.timeout_secs);
    let started = Instant::now();
    let call = |path: &'static str, timeout: Duration| Call {
        endpoint: &profile.endpoint,
        path,
        bearer: request.api_key,
        timeout,
        ca_file: profile.ca_file.as_deref(),
    };
    let timed_out = |error: ModelError| {
        if error == ModelError::Timeout(0) { ModelError::Timeout(profile.timeout_secs) } else { error }
    };
    match profile.backend {
        ModelBackend::Openai => {
            let body = |format: Value| {
                json!({
                    "model": profile.model,
                    "messages": messages,
                    "temperature": profile.temperature,
                    "max_tokens": profile.max_tokens,
                    "response_format": format,
                })
            };
            let strict = json!({
                "type": "json_schema",
                "json_schema": {"name": SCHEMA_NAME, "schema": request.schema, "strict": true},
            });
            let path = "/chat/completions";
            match post(&call(path, timeout), &body(strict)) {
                Err(ModelError::Status(status)) if SCHEMA_REFUSALS.contains(&status) => {
                    let left = timeout.checked_sub(started.elapsed()).filter(|left| !left.is_zero());
                    let left = left.ok_or(ModelError::Timeout(profile.timeout_secs))?;
                    let loose = json!({"type": JSON_OBJECT, "schema": request.schema});
                    let reply = post(&call(path, left), &body(loose)).map_err(timed_out)?;
                    let mut reply = openai_reply(&reply)?;
                    reply.response_format = Some(JSON_OBJECT);
                    Ok(reply)
                }
                reply => openai_reply(&reply.map_err(timed_out)?),
            }
        }
        ModelBackend::Ollama => {
            let body = json!({
                "model": profile.model,
                "messages": messages,
                "stream": false,
                "format": request.schema,
                "options": {"temperature": profile.temperature, "num_predict": profile.max_tokens},
            });
            let reply = post(&call("/api/chat", timeout), &body).map_err(timed_out)?;
            ollama_reply(&reply)
        }
    }
}

fn openai_reply(body: &Value) -> Result<ModelReply, ModelError> {
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or_else(|| ModelError::Protocol("no `choices`".to_string()))?;
    let text = choice
        .pointer("/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| ModelError::Protocol("no `choices[0].message.content`".to_string()))?;
    let usage = body.get("usage");
    Ok(ModelReply {
        text: text.to_string(),
        finish_reason: choice.get("finish_reason").and_then(Value::as_str).map(str::to_string),
        tokens_in: usage.and_then(|usage| usage.get("prompt_tokens")).and_then(Value::as_u64),
        tokens_out: usage.and_then(|usage| usage.get("completion_tokens")).and_then(Value::as_u64),
        response_format: None,
    })
}

fn ollama_reply(body: &Value) -> Result<ModelReply, ModelError> {
    let text = body
        .pointer("/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| ModelError::Protocol("no `message.content`".to_string()))?;
    Ok(ModelReply {
        text: text.to_string(),
        finish_reason: body.get("done_reason").and_then(Value::as_str).map(str::to_string),
        tokens_in: body.get("prompt_eval_count").and_then(Value::as_u64),
        tokens_out: body.get("eval_count").and_then(Value::as_u64),
        response_format: None,
    })
}

/// Where and how one call goes.
struct Call<'a> {
    endpoint: &'a str,
    path: &'a str,
    bearer: Option<&'a str>,
    timeout: Duration,
    ca_file: Option<&'a Path>,
}

/// `POST {endpoint}{path}` with a JSON body; the JSON answer of a 2xx.
/// `https://` goes through the TLS client ([`crate::tools::model_tls`]),
/// `http://` over a plain TCP connection. `Timeout(0)` stands for the
/// call's own timeout.
fn post(call: &Call<'_>, body: &Value) -> Result<Value, ModelError> {
    let payload = serde_json::to_vec(body).map_err(|error| ModelError::Protocol(error.to_string()))?;
    let (status, body) = if call.endpoint.starts_with("https://") {
        let url = format!("{}{}", call.endpoint.trim_end_matches('/'), call.path);
        model_tls::post(&TlsPost {
            url: &url,
            body: &payload,
            bearer: call.bearer,
            timeout: call.timeout,
            ca_file: call.ca_file,
            max_bytes: MAX_RESPONSE_BYTES,
        })
        .map_err(|error| match error {
            TlsError::Unreachable(text) => ModelError::Unreachable(text),
            TlsError::Timeout => ModelError::Timeout(0),
            TlsError::Protocol(text) => ModelError::Protocol(text),
        })?
    } else {
        plain_post(call, &payload)?
    };
    if !(200..300).contains(&status) {
        return Err(ModelError::Status(status));
    }
    crate::strict_json::parse_slice(&body)
        .map_err(|error| ModelError::Protocol(format!("body is not strict JSON: {error}")))
}

/// One `POST` over a plain TCP connection (HTTP/1.1, `Connection: close`):
/// the status and the (de-chunked) body.
fn plain_post(call: &Call<'_>, payload: &[u8]) -> Result<(u16, Vec<u8>), ModelError> {
    let (endpoint, path, bearer, timeout) = (call.endpoint, call.path, call.bearer, call.timeout);
    let started = Instant::now();
    let rest = endpoint
        .strip_prefix("http://")
        .ok_or_else(|| ModelError::Unreachable(format!("`{endpoint}` is not a plain `http://` URL")))?;
    let (authority, prefix) = rest.split_once('/').map_or((rest, ""), |(host, path)| (host, path));
    let prefix = prefix.trim_end_matches('/');
    let target = if prefix.is_empty() { path.to_string() } else { format!("/{prefix}{path}") };
    let address = if authority.contains(':') { authority.to_string() } else { format!("{authority}:80") };
    let addresses: Vec<_> = address
        .to_socket_addrs()
        .map_err(|error| ModelError::Unreachable(format!("`{authority}`: {error}")))?
        .collect();
    let first = addresses.first().ok_or_else(|| ModelError::Unreachable(format!("`{authority}` has no address")))?;
    let mut stream = TcpStream::connect_timeout(first, timeout).map_err(|error| match error.kind() {
        std::io::ErrorKind::TimedOut => ModelError::Timeout(0),
        _ => ModelError::Unreachable(error.to_string()),
    })?;
    let mut head = format!(
        "POST {target} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        payload.len()
    );
    if let Some(token) = bearer {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    head.push_str("\r\n");
    let remaining = |started: Instant| timeout.checked_sub(started.elapsed()).filter(|left| !left.is_zero());
    let io = |error: std::io::Error| match error.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => ModelError::Timeout(0),
        _ => ModelError::Unreachable(error.to_string()),
    };
    stream.set_write_timeout(remaining(started).or(Some(Duration::from_millis(1)))).map_err(io)?;
    stream.write_all(head.as_bytes()).map_err(io)?;
    stream.write_all(payload).map_err(io)?;
    let mut response = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let left = remaining(started).ok_or(ModelError::Timeout(0))?;
        stream.set_read_timeout(Some(left)).map_err(io)?;
        let read = stream.read(&mut buffer).map_err(io)?;
        if read == 0 {
            break;
        }
        response.extend_from_slice(&buffer[..read]);
        if response.len() > MAX_RESPONSE_BYTES + 64 * 1024 {
            return Err(ModelError::Protocol(format!("response larger than {MAX_RESPONSE_BYTES} bytes")));
        }
        if complete(&response) {
            break;
        }
    }
    parse_response(&response)
}

/// The header block's end, if the response has one.
fn header_end(response: &[u8]) -> Option<usize> {
    response.windows(4).position(|window| window == b"\r\n\r\n").map(|at| at + 4)
}

/// Whether a response with a `Content-Length` has all of its body (a
/// chunked or unsized one is read to the end of the connection).
fn complete(response: &[u8]) -> bool {
    let Some(end) = header_end(response) else {
        return false;
    };
    let head = String::from_utf8_lossy(&response[..end]).to_ascii_lowercase();
    head.lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|length| length.trim().parse::<usize>().ok())
        .is_some_and(|length| response.len() >= end + length)
}

/// The status code and the (de-chunked) body.
fn parse_response(response: &[u8]) -> Result<(u16, Vec<u8>), ModelError> {
    let end = header_end(response).ok_or_else(|| ModelError::Protocol("no complete HTTP header".to_string()))?;
    let head = String::from_utf8_lossy(&response[..end]).to_ascii_lowercase();
    let status = head
        .lines()
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| ModelError::Protocol("no HTTP status line".to_string()))?;
    let body = &response[end..];
    let chunked = head.lines().any(|line| line.starts_with("transfer-encoding:") && line.contains("chunked"));
    if !chunked {
        let length = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|length| length.trim().parse::<usize>().ok())
            .unwrap_or(body.len());
        return Ok((status, body[..length.min(body.len())].to_vec()));
    }
    let mut out = Vec::new();
    let mut rest = body;
    loop {
        let line_end = rest
            .windows(2)
            .position(|window| window == b"\r\n")
            .ok_or_else(|| ModelError::Protocol("truncated chunked body".to_string()))?;
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| ModelError::Protocol("bad chunk size".to_string()))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok((status, out));
        }
        if rest.len() < size + 2 {
            return Err(ModelError::Protocol("truncated chunked body".to_string()));
        }
        out.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}
