//! `GET /runs?limit=&after=`: bridge runs newest first, paged by the id of
//! the last run of the previous page; bad paging parameters answer 400 with
//! a JSON error; a tampered record is listed as unreadable.

use serde_json::{Value, json};

use crate::serve_harness::{Server, client, error_code, get_json, post};

fn ids(page: &Value) -> Vec<&str> {
    page["runs"].as_array().expect("runs").iter().filter_map(|run| run["run_id"].as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_runs_are_listed_newest_first_a_page_at_a_time() {
    let server = Server::start(&[]);
    let client = client();
    let (status, empty) = get_json(&client, &server.url("/runs")).await;
    assert_eq!((status, &empty), (200, &json!({"runs": [], "next_after": null})), "no bridge runs yet");
    for goal in ["one", "two", "three"] {
        let (status, body) = post(&client, &server.url("/runs"), json!({"goal": goal, "adapter": "local_echo"})).await;
        assert_eq!(status, 201, "{body}");
    }

    let (status, first) = get_json(&client, &server.url("/runs?limit=2")).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(ids(&first), ["br-0003", "br-0002"]);
    assert_eq!(first["next_after"], "br-0002");
    assert_eq!(first["runs"][0]["goal"], "three");
    let (_, one) = get_json(&client, &server.url("/runs/br-0003")).await;
    assert_eq!(first["runs"][0], one, "each run is its stored bridge state");

    let (status, next) = get_json(&client, &server.url("/runs?limit=2&after=br-0002")).await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(ids(&next), ["br-0001"]);
    assert_eq!(next["next_after"], Value::Null, "the last page");

    let (_, all) = get_json(&client, &server.url("/runs")).await;
    assert_eq!((ids(&all), &all["next_after"]), (vec!["br-0003", "br-0002", "br-0001"], &Value::Null));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_paging_parameters_answer_400_with_a_json_error() {
    let server = Server::start(&[]);
    let client = client();
    post(&client, &server.url("/runs"), json!({"goal": "one", "adapter": "local_echo"})).await;
    for query in ["limit=0", "limit=101", "limit=abc", "limit=-1", "after=..", "page=2"] {
        let answer = error_code(client.get(server.url(&format!("/runs?{query}")))).await;
        assert_eq!(answer, (400, "invalid_paging".to_string()), "{query}");
    }
    let unknown = error_code(client.get(server.url("/runs?after=br-9999"))).await;
    assert_eq!(unknown, (404, "run_not_found".to_string()), "a valid id that names no bridge run");
    let response = client.get(server.url("/runs?limit=0")).send().await.expect("send");
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["error"]["message"], "`limit` must be a whole number from 1 to 100, not `0`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_bridge_record_is_listed_as_unreadable() {
    let server = Server::start(&[]);
    let client = client();
    for goal in ["one", "two"] {
        post(&client, &server.url("/runs"), json!({"goal": goal, "adapter": "local_echo"})).await;
    }
    let path = server.sandbox.workspace().join("bridge/runs/br-0001/state.json");
    let text = std::fs::read_to_string(&path).expect("record");
    std::fs::write(&path, text.replacen("\"goal\": \"one\"", "\"goal\": \"forged\"", 1)).expect("tamper");

    let (status, page) = get_json(&client, &server.url("/runs")).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(ids(&page), ["br-0002", "br-0001"]);
    let tampered = &page["runs"][1];
    assert_eq!(tampered["status"], "unreadable", "{tampered}");
    assert!(tampered["error"].as_str().is_some_and(|error| error.contains("br-0001")), "{tampered}");
    assert!(tampered.get("goal").is_none(), "nothing from the tampered record is shown: {tampered}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_describes_the_page_and_its_errors() {
    let server = Server::start(&[]);
    let (_, document) = get_json(&client(), &server.url("/openapi.json")).await;
    let list = &document["paths"]["/runs"]["get"];
    let names: Vec<&str> =
        list["parameters"].as_array().expect("parameters").iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["limit", "after"]);
    for status in ["200", "400", "500"] {
        assert!(list["responses"].get(status).is_some(), "GET /runs documents {status}");
    }
    assert!(list["responses"].get("401").is_none(), "no token is set, so no 401 is documented");
    let page = &document["components"]["schemas"]["RunPage"];
    assert_eq!(page["required"], json!(["runs", "next_after"]));
}
