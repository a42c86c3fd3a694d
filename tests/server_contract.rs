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
