//! A small HTTP/1.1 server on loopback for the `http` step tests: it logs
//! every request it receives (method, path, headers, body) and answers by
//! path, so a test can prove what reached it and that nothing did.
//!
//! | path | answer |
//! |---|---|
//! | `/api/items` | 200, `{"items": [1, 2]}` |
//! | `/api/echo` | 201, the request as JSON (method, path, headers, body) |
//! | `/api/slow` | 200 after 3 s |
//! | `/api/big` | 200, 10 000 bytes of `x` |
//! | `/api/status/NNN` | status NNN |
//! | `/api/redirect/ANYTHING?to=URL` | 302 to URL |
//! | anything else | 404 |

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request the fixture received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    /// Path and query as sent.
    pub target: String,
    /// Names lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }
}

/// The running fixture; it stops with the test process.
pub struct HttpFixture {
    pub address: SocketAddr,
    log: Arc<Mutex<Vec<Received>>>,
}

impl HttpFixture {
    /// A fixture on `127.0.0.1` at a free port.
    pub fn start() -> HttpFixture {
        HttpFixture::start_at("127.0.0.1".parse().expect("ip"), 0)
    }

    /// A fixture on `ip:port` (`0`: a free port).
    pub fn start_at(ip: IpAddr, port: u16) -> HttpFixture {
        let listener = TcpListener::bind((ip, port)).expect("bind the HTTP fixture");
        let address = listener.local_addr().expect("address");
        let log = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::clone(&log);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, &log));
            }
        });
        HttpFixture { address, log }
    }

    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Received> {
        self.log.lock().expect("log").clone()
    }
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Received>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut stream = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
        let length = headers
            .iter()
            .find(|(name, _)| name == "content-length")
            .and_then(|(_, value)| value.parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let received = Received { method, target, headers, body: String::from_utf8_lossy(&body).into_owned() };
        log.lock().expect("log").push(received.clone());
        let (status, extra, content) = answer(&received);
        let response = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nx-fixture: yes\r\n{extra}\r\n",
            content.len()
        );
        // One write (and no Nagle delay), so a keep-alive client never
        // waits on a delayed acknowledgement.
        let mut bytes = response.into_bytes();
        bytes.extend_from_slice(content.as_bytes());
        if stream.write_all(&bytes).is_err() {
            return;
        }
    }
}

fn answer(request: &Received) -> (u16, String, String) {
    let (path, query) = request.target.split_once('?').unwrap_or((&request.target, ""));
    match path {
        "/api/items" => (200, String::new(), r#"{"items": [1, 2]}"#.to_string()),
        "/api/echo" => {
            let echo = serde_json::json!({
                "method": request.method,
                "target": request.target,
                "headers": request.headers.iter().map(|(name, value)| (name.clone(), serde_json::json!(value))).collect::<serde_json::Map<_, _>>(),
                "body": request.body,
            });
            (201, String::new(), echo.to_string())
        }
        "/api/slow" => {
            std::thread::sleep(Duration::from_secs(3));
            (200, String::new(), "{}".to_string())
        }
        "/api/big" => (200, String::new(), "x".repeat(10_000)),
        _ if path.starts_with("/api/status/") => {
            (path["/api/status/".len()..].parse().unwrap_or(500), String::new(), r#"{"error": "as asked"}"#.to_string())
        }
        _ if path.starts_with("/api/redirect/") => {
            let to = query.strip_prefix("to=").unwrap_or("/");
            (302, format!("location: {to}\r\n"), String::new())
        }
        _ => (404, String::new(), r#"{"error": "not found"}"#.to_string()),
    }
}
