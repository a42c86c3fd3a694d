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
//!
//! [`HttpFixture::proxy_to`] starts the same server as a logging HTTP
//! proxy instead: a request in absolute form (`GET http://host:port/path`)
//! is logged (its `target` the absolute URL) and forwarded to one upstream
//! address, whatever host it names; a `CONNECT` is logged and refused
//! (403), so a test sees that an `https` request asked for a tunnel.

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

/// Where a proxy fixture forwards (`None`: an origin server).
type Upstream = Option<SocketAddr>;

impl HttpFixture {
    /// A fixture on `127.0.0.1` at a free port.
    pub fn start() -> HttpFixture {
        HttpFixture::start_at("127.0.0.1".parse().expect("ip"), 0)
    }

    /// A fixture on `ip:port` (`0`: a free port).
    pub fn start_at(ip: IpAddr, port: u16) -> HttpFixture {
        HttpFixture::listen(ip, port, None)
    }

    /// A logging proxy on `127.0.0.1` at a free port that forwards every
    /// absolute-form request to `upstream`.
    pub fn proxy_to(upstream: SocketAddr) -> HttpFixture {
        HttpFixture::listen("127.0.0.1".parse().expect("ip"), 0, Some(upstream))
    }

    /// `http://127.0.0.1:PORT`, the fixture as a proxy URL.
    pub fn proxy_url(&self) -> String {
        format!("http://{}", self.address)
    }

    fn listen(ip: IpAddr, port: u16, upstream: Upstream) -> HttpFixture {
        let listener = TcpListener::bind((ip, port)).expect("bind the HTTP fixture");
        let address = listener.local_addr().expect("address");
        let log = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::clone(&log);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, &log, upstream));
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

fn serve(stream: TcpStream, log: &Mutex<Vec<Received>>, upstream: Upstream) {
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
        if let Some(upstream) = upstream {
            let bytes = forward(&received, upstream);
            if stream.write_all(&bytes).is_err() || received.method == "CONNECT" {
                return;
            }
            continue;
        }
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

/// The proxy's answer to `request`: the upstream's answer to it in origin
/// form, 403 to a `CONNECT`, 400 to a request that is not in absolute form.
fn forward(request: &Received, upstream: SocketAddr) -> Vec<u8> {
    let refuse = |status: &str| format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n").into_bytes();
    if request.method == "CONNECT" {
        return refuse("403 Forbidden");
    }
    let Some(rest) = request.target.strip_prefix("http://") else {
        return refuse("400 Bad Request");
    };
    let path = rest.find('/').map_or("/", |at| &rest[at..]);
    let mut sent = format!("{} {path} HTTP/1.1\r\n", request.method);
    for (name, value) in request.headers.iter().filter(|(name, _)| !name.ends_with("connection")) {
        sent.push_str(&format!("{name}: {value}\r\n"));
    }
    sent.push_str("\r\n");
    sent.push_str(&request.body);
    let mut connection = TcpStream::connect(upstream).expect("connect upstream");
    connection.write_all(sent.as_bytes()).expect("forward");
    // The origin fixture reads the next request, finds none and closes.
    connection.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let mut answer = Vec::new();
    connection.read_to_end(&mut answer).expect("read upstream");
    answer
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
