//! The published contract is exact (issue 11, item 7): the document
//! declares bearer auth only when a token is set, every error has a JSON
//! body (paths that are not UTF-8 included), JSON Schema integers in float
//! form are accepted, and what the schema refuses (white-space goals,
//! control characters) the service refuses too. `.ci/schemathesis` checks
//! the whole document against a live service.

use serde_json::{Value, json};

use crate::serve_harness::{Server, client, error_code, get_json, post};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_auth_is_declared_only_when_a_token_is_set() {
    let open = Server::start(&[]);
    let (_, document) = get_json(&client(), &open.url("/openapi.json")).await;
    assert_eq!(document.get("security"), None);
    assert_eq!(document["paths"]["/runs/{id}"]["get"]["responses"].get("401"), None);
    let guarded = Server::start(&[("PLANRUN_API_TOKEN", "s3cret")]);
    let response = client().get(guarded.url("/openapi.json")).bearer_auth("s3cret").send().await.expect("send");
    let document: Value = response.json().await.expect("JSON");
    assert_eq!(document["security"], json!([{"bearer": []}]));
    assert!(document["paths"]["/runs/{id}"]["get"]["responses"]["401"].is_object());
    assert_eq!(document["paths"]["/health"]["get"]["security"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_that_are_not_utf8_get_a_json_error() {
    let server = Server::start(&[]);
    let client = client();
    for path in ["/runs/%FF", "/controller/runs/%FF"] {
        assert_eq!(error_code(client.get(server.url(path))).await, (400, "invalid_run_id".into()), "{path}");
    }
    for path in ["/runs/%FF/approve", "/runs/%FF/reject"] {
        let request = client.post(server.url(path)).json(&json!({"fingerprint": "0".repeat(64)}));
        assert_eq!(error_code(request).await, (400, "invalid_run_id".into()), "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_refuses_what_the_schema_refuses_and_nothing_more() {
    let server = Server::start(&[]);
    let client = client();
    // 604800.0 is a JSON Schema integer: not a 422 but the run's own 404.
    let approve = json!({"fingerprint": "a".repeat(64), "expires_in_secs": 604800.0, "state_version": 3.0});
    assert_eq!(
        error_code(client.post(server.url("/runs/br-0404/approve")).json(&approve)).await,
        (404, "run_not_found".into())
    );
    let fractional = json!({"fingerprint": "a".repeat(64), "expires_in_secs": 1.5});
    assert_eq!(error_code(client.post(server.url("/runs/br-0404/approve")).json(&fractional)).await.0, 422);
    let padded = json!({"fingerprint": format!(" {} ", "a".repeat(64))});
    assert_eq!(error_code(client.post(server.url("/runs/br-0404/approve")).json(&padded)).await.0, 400);
    for body in [json!({"reason": "line\u{7}bell"}), json!({"reason": "x".repeat(2001)})] {
        assert_eq!(error_code(client.post(server.url("/runs/br-0404/reject")).json(&body)).await.0, 400);
    }
    for path in ["/runs", "/controller/runs"] {
        let blank = json!({"goal": " \u{3000}\n\t"});
        assert_eq!(error_code(client.post(server.url(path)).json(&blank)).await, (400, "invalid_request".into()));
        let request = client.post(server.url(path)).header("content-type", "text/plain").body("{}");
        assert_eq!(error_code(request).await, (415, "unsupported_media_type".into()), "{path}");
    }
    assert!(!server.exists("bridge/runs"), "nothing was refused by running it");
    // U+FEFF is not white space: the schema's pattern and the service agree.
    let (status, _) = post(&client, &server.url("/runs"), json!({"goal": "\u{feff}", "adapter": "stub"})).await;
    assert_eq!(status, 201);
}

/// Issue 22 item 6: a body is strict JSON. `{"goal": "a", "goal": "b"}`
/// ran `b`; now it, `NaN` and trailing data are 400 `malformed_json` naming
/// what was refused, and no run is created (a valid body still is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_with_a_duplicate_key_nan_or_trailing_data_is_refused_and_runs_nothing() {
    let server = Server::start(&[]);
    let client = client();
    let runs = |server: &Server| -> usize {
        std::fs::read_dir(server.sandbox.workspace().join("bridge/runs")).map_or(0, |entries| entries.count())
    };
    for path in ["/runs", "/controller/runs"] {
        for (body, named) in [
            (r#"{"goal": "show the current directory", "goal": "close ticket"}"#, "duplicate key `goal`"),
            (r#"{"goal": "x", "adapter": "stub", "wait": {"a": 1, "a": 2}}"#, "duplicate key `a`"),
            (r#"{"goal": "show the current directory", "n": NaN}"#, "`NaN` is not a JSON number"),
            (r#"{"goal": "show the current directory", "n": -Infinity}"#, "`-Infinity` is not a JSON number"),
            (r#"{"goal": "show the current directory"} {"goal": "close ticket"}"#, "trailing data"),
        ] {
            let response = client
                .post(server.url(path))
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("send");
            assert_eq!(response.status().as_u16(), 400, "{path} {body}");
            let error: Value = response.json().await.expect("JSON error");
            assert_eq!(error["error"]["code"], "malformed_json", "{path} {body}: {error}");
            let message = error["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(named), "{path} {body}: {message}");
        }
    }
    let approve =
        r#"{"fingerprint": "0000000000000000000000000000000000000000000000000000000000000000", "fingerprint": "1"}"#;
    let request = client.post(server.url("/runs/br-0404/approve")).header("content-type", "application/json");
    assert_eq!(error_code(request.body(approve)).await, (400, "malformed_json".into()));
    assert_eq!(runs(&server), 0, "no run was created");
    let (status, _) = post(&client, &server.url("/runs"), json!({"goal": "show the current directory"})).await;
    assert_eq!(status, 201);
    assert_eq!(runs(&server), 1, "a strict body still runs");
}
