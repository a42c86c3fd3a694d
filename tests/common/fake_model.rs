//! A scripted fake model on loopback speaking the OpenAI chat-completions
//! protocol (`POST /v1/chat/completions`): it answers each request with the
//! next scripted answer (the last one again once the script is used up),
//! counts the requests and keeps their bodies.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

pub struct FakeModel {
    pub port: u16,
    requests: Arc<AtomicUsize>,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl FakeModel {
    /// Serves `answers` (each the JSON text of one answer) in order.
    pub fn start(answers: Vec<String>) -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().expect("address").port();
        let requests = Arc::new(AtomicUsize::new(0));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let (counter, kept) = (requests.clone(), bodies.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let Some(body) = read_request(&mut stream) else { continue };
                let index = counter.fetch_add(1, Ordering::SeqCst);
                kept.lock().expect("bodies").push(body);
                let answer = answers.get(index).or(answers.last()).cloned().unwrap_or_default();
                let reply = json!({
                    "id": format!("fake-{index}"),
                    "object": "chat.completion",
                    "model": "fake",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                })
                .to_string();
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                    reply.len()
                );
                let _ = stream.write_all(response.as_bytes());
            }
        });
        FakeModel { port, requests, bodies }
    }

    /// Requests answered so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// The request bodies, in order.
    pub fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().expect("bodies").clone()
    }

    /// A `[models.fake]` table pointing at this server.
    pub fn profile(&self) -> String {
        format!(
            "[models.fake]\nbackend = \"openai\"\nendpoint = \"http://127.0.0.1:{}/v1\"\nmodel = \"fake\"\ntimeout_secs = 10\n",
            self.port
        )
    }
}

fn read_request(stream: &mut std::net::TcpStream) -> Option<Value> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        let read = stream.read(&mut buffer).ok()?;
        if read == 0 {
            return None;
        }
        data.extend_from_slice(&buffer[..read]);
        if let Some(end) = data.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return serde_json::from_slice(&data[end + 4..end + 4 + length]).ok();
            }
        }
    }
}

/// An `action` answer.
pub fn action(tool: &str, arguments: Value) -> String {
    json!({"type": "action", "tool": tool, "arguments": arguments}).to_string()
}

/// A `finish` answer.
pub fn finish(summary: &str) -> String {
    json!({"type": "finish", "summary": summary}).to_string()
}

/// An `ask` answer.
pub fn ask(question: &str) -> String {
    json!({"type": "ask", "question": question}).to_string()
}
