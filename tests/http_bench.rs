//! The `http` benchmark (`tests/bench/http.sh`, figures in
//! docs/performance.md#http-steps): N requests to the loopback fixture,
//! each way best of `HTTP_BENCH_ROUNDS` (default 5), the ways alternating
//! round by round so that they share the machine's load:
//!
//! - `bare`: a bare reqwest loop, one client, the N requests in one
//!   `block_on` of a current-thread runtime;
//! - `bare-sync`: the same client, one `block_on` and one timeout per
//!   request: the shape a synchronous engine needs;
//! - `tool`: the `http` tool in process (URL normalisation, the egress
//!   rules, the checked connection, the capped body, the output);
//! - whole runs of plans of 1 and N+1 steps, as a marginal cost per step
//!   (process start and plan load cancel out): `GET` steps (reads: their
//!   records are written and synced with the run's next checkpoint sync),
//!   `read_file` steps (the same records and durability with a tool that
//!   does almost nothing: the record's own cost), `POST` steps and `flaky`
//!   steps (writes: one `fdatasync` before each).
//!
//! With `HTTP_BENCH_ADDRESS=127.0.0.1:PORT` every way goes to a server in
//! another process instead of the in-process fixture (a run always talks
//! to a server in another process; the bare loop and the tool then pay the
//! same hand-off between processes).
//!
//! Prints µs per request or step and ratios; never asserted.

use std::time::{Duration, Instant};

use crate::common::Sandbox;
use crate::common::http_fixture::HttpFixture;

/// The fixture's policy: one rule, no other section.
fn policy_text(port: u16, steps: usize) -> String {
    format!(
        "version = 1\n[http]\n[[http.allow]]\nid = \"fixture\"\nmethods = [\"GET\", \"POST\"]\nscheme = \"http\"\nhost = \"127.0.0.1\"\nport = {port}\npath = \"/api\"\nprivate = true\n[budget]\nmax_steps = {0}\nmax_tool_calls = {0}\n",
        steps + 10
    )
}

/// A plan of `n` steps of one kind (`GET`, `POST`, `read_file`, `flaky`).
fn plan(kind: &str, n: usize, url: &str) -> String {
    let mut plan = String::from("version = 1\nid = \"test\"\n");
    for index in 0..n {
        let step = match kind {
            "GET" | "POST" => format!("kind = \"http\"\nmethod = \"{kind}\"\nurl = \"{url}\""),
            "read_file" => "kind = \"read_file\"\npath = \"data/items.json\"".to_string(),
            _ => "kind = \"flaky\"\nfailures = 0".to_string(),
        };
        plan.push_str(&format!("\n[[steps]]\nid = \"s-{index}\"\n{step}\n"));
    }
    plan
}

/// One way of sending, timed each round.
struct Way {
    name: &'static str,
    best: f64,
    round: Box<dyn FnMut() -> f64>,
}

#[test]
#[ignore = "benchmark: run by tests/bench/http.sh"]
fn http_bench() {
    use planrun::model::{HostPattern, HttpPolicy, HttpRule};
    use planrun::tools::http::{HttpCall, HttpTool};
    let n: usize = planrun::runtime::process_var("HTTP_BENCH_N").and_then(|n| n.parse().ok()).unwrap_or(200);
    let rounds: usize = planrun::runtime::process_var("HTTP_BENCH_ROUNDS").and_then(|n| n.parse().ok()).unwrap_or(5);
    let fixture = HttpFixture::start();
    // `HTTP_BENCH_ADDRESS` (`127.0.0.1:PORT`): every way against a server
    // in another process instead (it must answer `/api/items` with the
    // fixture's 17 bytes), so that the bare loop and the tool pay the same
    // cross-process hand-off as a run.
    let address = planrun::runtime::process_var("HTTP_BENCH_ADDRESS");
    let port = address
        .as_deref()
        .and_then(|address| address.rsplit(':').next()?.parse().ok())
        .unwrap_or_else(|| fixture.port());
    let url = format!("http://127.0.0.1:{port}/api/items");
    let timed = |work: &mut dyn FnMut()| {
        let started = Instant::now();
        work();
        started.elapsed().as_secs_f64()
    };
    let runtime = std::rc::Rc::new(tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt"));
    let client = crate::serve_harness::client();
    let mut ways: Vec<Way> = Vec::new();

    let (bare_runtime, bare_client, bare_url) = (runtime.clone(), client.clone(), url.clone());
    ways.push(Way {
        name: "bare",
        best: f64::MAX,
        round: Box::new(move || {
            timed(&mut || {
                bare_runtime.block_on(async {
                    for _ in 0..n {
                        let response = bare_client.get(&bare_url).send().await.expect("request");
                        assert_eq!(response.bytes().await.expect("body").len(), 17);
                    }
                });
            })
        }),
    });
    let (sync_runtime, sync_url) = (runtime.clone(), url.clone());
    ways.push(Way {
        name: "bare-sync",
        best: f64::MAX,
        round: Box::new(move || {
            timed(&mut || {
                for _ in 0..n {
                    sync_runtime.block_on(async {
                        let exchange = async {
                            let response = client.get(&sync_url).send().await.expect("request");
                            response.bytes().await.expect("body").len()
                        };
                        let length = tokio::time::timeout(Duration::from_secs(10), exchange).await.expect("in time");
                        assert_eq!(length, 17);
                    });
                }
            })
        }),
    });

    let policy = HttpPolicy {
        allow: vec![HttpRule {
            name: "fixture".into(),
            methods: vec!["GET".into()],
            scheme: "http".into(),
            host: HostPattern::Exact("127.0.0.1".into()),
            port: Some(port),
            path: "/api".into(),
            path_matches: None,
            private: true,
            redirects: 0,
            reason: None,
            origin: None,
        }],
        ..HttpPolicy::default()
    };
    let headers = std::collections::BTreeMap::new();
    let tool_url = url.clone();
    let mut tool = HttpTool::default();
    ways.push(Way {
        name: "tool",
        best: f64::MAX,
        round: Box::new(move || {
            timed(&mut || {
                for _ in 0..n {
                    let call = HttpCall {
                        method: "GET",
                        url: &tool_url,
                        headers: &headers,
                        body: None,
                        json_body: false,
                        idempotency_key: None,
                        expect_status: &[],
                        max_response_bytes: None,
                        response_headers: &[],
                        timeout: Duration::from_secs(10),
                    };
                    assert!(tool.call(&policy, &call).result.is_ok());
                }
            })
        }),
    });

    // Whole runs: each kind's sandbox holds a plan of 1 step and one of
    // N+1; a round's figure is the difference, per step.
    let sandbox = std::rc::Rc::new(Sandbox::new());
    sandbox.write("workspace/data/items.json", r#"{"items": [1, 2]}"#);
    for (name, kind) in
        [("run GET", "GET"), ("run read_file", "read_file"), ("run POST", "POST"), ("run flaky", "flaky")]
    {
        for (size, steps) in [("one", 1), ("many", n + 1)] {
            sandbox.write(&format!("plans/{kind}-{size}.toml"), &plan(kind, steps, &url));
        }
        sandbox.write("policies/default.toml", &policy_text(port, n + 1));
        let (sandbox, mut round) = (sandbox.clone(), 0);
        ways.push(Way {
            name,
            best: f64::MAX,
            round: Box::new(move || {
                let mut run = |size: &str| {
                    round += 1;
                    let _ = std::fs::remove_dir_all(sandbox.workspace().join("runs"));
                    let output = sandbox
                        .planrun()
                        .in_sandbox()
                        .args(["--plan", &format!("plans/{kind}-{size}.toml"), "--policies", "policies", "--run-id"])
                        .arg(format!("b{round}"))
                        .arg("--quiet")
                        .run();
                    assert_eq!(output.code, 0, "{}", output.snapshot());
                };
                let one = timed(&mut || run("one"));
                let many = timed(&mut || run("many"));
                (many - one).max(0.0)
            }),
        });
    }

    for _ in 0..rounds {
        for way in &mut ways {
            let seconds = (way.round)();
            way.best = way.best.min(seconds);
        }
    }
    let per = |seconds: f64| seconds * 1e6 / n as f64;
    let bare = ways[0].best;
    println!("http: {n} requests to a loopback server, best of {rounds}, ways alternating");
    for way in &ways {
        println!("http: {:<14} {:8.1} µs per request or step  ratio {:.2}", way.name, per(way.best), way.best / bare);
    }
}
