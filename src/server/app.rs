//! The HTTP routes. Handlers only parse, call [`bridge`] / [`controller`]
//! and answer; the logic lives in those modules.
//!
//! Runs execute in their own task, holding a slot of the service's
//! semaphore: a client that disconnects does not abandon its run, and
//! shutdown waits for every slot. The task runs on a blocking thread (the
//! store writes with blocking file I/O and, under group commit, waits there
//! for the barrier it shares with concurrent runs, never on the runtime's
//! workers), and a run is answered only once what it answers is durable
//! ([`crate::ops::service::durable_task`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::model::{MAX_APPROVAL_SECS, MAX_NAME_CHARS, MAX_REASON_CHARS, check_decision_text};
use crate::ops::service::Service;
use crate::ops::service::accepted;
use crate::ops::service::adapters::AdapterKind;
use crate::ops::service::bridge::{self, BridgeState, BridgeStatus, Origin};
use crate::ops::service::controller;
use crate::ops::service::durable_task::{Then, run_in_slot};
use crate::ops::service::run_list::{self, PageError, Paging, RunPage};
use crate::server::approvals::{self, ApprovalRequest};
use crate::server::error::ApiError;
use crate::server::json_body::ObjectBody;
use crate::server::openapi;
use crate::store::{RecordKind, RunId};

/// The largest request body accepted, in bytes.
pub const BODY_LIMIT: usize = 64 * 1024;

/// The service's routes.
pub fn router(service: Arc<Service>) -> Router {
    let protected = Router::new()
        .route("/runs", post(create_run).get(list_runs))
        .route("/runs/{id}", get(get_run))
        .route("/runs/{id}/approve", post(approve_run))
        .route("/runs/{id}/reject", post(reject_run))
        .route("/runs/{id}/answer", post(answer_run))
        .route("/controller/runs", post(create_controller_run))
        .route("/controller/runs/{id}", get(get_controller_run))
        .route("/openapi.json", get(get_openapi))
        .route_layer(middleware::from_fn_with_state(Arc::clone(&service), require_token));
    Router::new()
        .route("/health", get(health))
        .merge(protected)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(service)
}

/// `POST /runs` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunBody {
    goal: String,
    #[serde(default = "default_adapter")]
    adapter: String,
    /// `false`: answer 202 once the run is recorded, and drive it after.
    #[serde(default = "default_wait")]
    wait: bool,
    /// The plan's inputs (agent adapter): checked against the plan the goal
    /// routes to before the run is accepted (422 when refused).
    #[serde(default, deserialize_with = "present")]
    inputs: Option<Value>,
}

/// A key that is present keeps its value, `null` included (serde would
/// read `null` as absent): `"inputs": null` is refused, not ignored.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

fn default_wait() -> bool {
    true
}

fn default_adapter() -> String {
    "agent".to_string()
}

/// `POST /runs/{id}/approve` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    /// Required: an operator approves the action they saw.
    fingerprint: String,
    scope: Option<String>,
    #[serde(default, deserialize_with = "json_integer::optional")]
    state_version: Option<u64>,
    #[serde(default = "default_expires_in_secs", deserialize_with = "json_integer::required")]
    expires_in_secs: u64,
    approved_by: Option<String>,
}

/// How long an approval stays valid by default (as `planrun approve`).
const DEFAULT_EXPIRES_IN_SECS: u64 = 3600;

fn default_expires_in_secs() -> u64 {
    DEFAULT_EXPIRES_IN_SECS
}

/// `POST /runs/{id}/reject` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RejectBody {
    reason: Option<String>,
}

/// `POST /runs/{id}/answer` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    /// The person's answer: 1 to 2000 bytes, not blank (as `planrun answer`).
    answer: String,
}

/// `POST /controller/runs` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ControllerBody {
    goal: String,
    /// The inputs of the plan the goal routes to: checked before the
    /// controller run is created (422 when refused), given to each run of
    /// that plan.
    #[serde(default, deserialize_with = "present")]
    inputs: Option<Value>,
}

async fn health(State(service): State<Arc<Service>>) -> Json<Value> {
    let adapters: Map<String, Value> = AdapterKind::ALL
        .into_iter()
        .map(|kind| (kind.name().to_string(), json!(service.adapters.mode(kind).as_str())))
        .collect();
    let mut health = json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "adapters": adapters,
        "decision_backend": service.decision.name(),
        "decision_model": service.decision.model(),
        "ollama_model": service.adapters.ollama.model,
        "auth_required": service.api_token.is_some(),
    });
    // Present only when `auto` fell back to the stub: why.
    if let Some(note) = &service.decision_note {
        health["decision_backend_note"] = json!(note);
    }
    Json(health)
}

async fn create_run(
    State(service): State<Arc<Service>>,
    body: Result<ObjectBody<RunBody>, ApiError>,
) -> Result<Response, ApiError> {
    let ObjectBody(body) = body?;
    let goal = check_goal(body.goal)?;
    let adapter = AdapterKind::parse(&body.adapter).ok_or_else(|| {
        let known = AdapterKind::ALL.map(|kind| format!("`{}`", kind.name())).join(", ");
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "unknown_adapter",
            format!("unknown adapter `{}`; known adapters: {known}", body.adapter),
        )
    })?;
    let inputs = check_inputs(&service, &goal, adapter, body.inputs)?;
    if !body.wait {
        return accept_run(&service, goal, inputs, adapter).await;
    }
    let outcome = run_in_slot(&service, Then::Answer, move |service| async move {
        bridge::execute_run(&service, &goal, &inputs, adapter, Origin::Api).await
    })
    .await?;
    Ok((StatusCode::CREATED, Json(outcome.state)).into_response())
}

/// `"wait": false`: records the bridge run as `queued` and makes it
/// durable, answers 202 with its state and `Location`, then drives it on
/// this node in the background (holding its record throughout, so no scan
/// takes it meanwhile). If this node dies first, the run stays `queued` and
/// the scan of a node of the workspace drives it ([`accepted`]).
async fn accept_run(
    service: &Arc<Service>,
    goal: String,
    inputs: Map<String, Value>,
    adapter: AdapterKind,
) -> Result<Response, ApiError> {
    let (records, state) = run_in_slot(service, Then::MakeDurable, move |service| async move {
        bridge::accept_run(&service, &goal, &inputs, adapter, Origin::Api, BridgeStatus::Queued)
    })
    .await?;
    let location = format!("/runs/{}", state.run_id);
    accepted::drive_in_background(service, records, state.clone(), adapter);
    Ok((StatusCode::ACCEPTED, [(header::LOCATION, location)], Json(state)).into_response())
}

/// `GET /runs?limit=&after=`: a page of bridge runs, newest first.
async fn list_runs(
    State(service): State<Arc<Service>>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Json<RunPage>, ApiError> {
    let Query(query) = query.map_err(|rejection| PageError::Invalid(rejection.body_text()))?;
    Ok(Json(run_list::page(&service, &Paging::parse(&query)?)?))
}

/// The bridge run, read through to its agent run when it waits for approval
/// (see [`bridge::read_current`]).
async fn get_run(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<BridgeState>, ApiError> {
    let id = run_id(id)?;
    bridge::read_current(&service, id.as_str())?.map(Json).ok_or_else(|| ApiError::not_found("bridge run", id.as_str()))
}

async fn approve_run(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    body: Result<ObjectBody<ApproveBody>, ApiError>,
) -> Result<Json<BridgeState>, ApiError> {
    let id = run_id(id)?;
    let ObjectBody(body) = body?;
    // Exactly the documented pattern: no trimming, so the published schema
    // and the service refuse the same values.
    let fingerprint = body.fingerprint;
    if fingerprint.len() != 64 || !fingerprint.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err(invalid("`fingerprint` must be the 64 hex digits of the pending action's fingerprint"));
    }
    if !(1..=MAX_APPROVAL_SECS).contains(&body.expires_in_secs) {
        return Err(invalid(format!("`expires_in_secs` must be between 1 and {MAX_APPROVAL_SECS}")));
    }
    let approved_by = optional_text(body.approved_by, "approved_by", MAX_NAME_CHARS)?;
    let request = ApprovalRequest {
        fingerprint: fingerprint.to_ascii_lowercase(),
        scope: body.scope,
        state_version: body.state_version,
        expires_in: Duration::from_secs(body.expires_in_secs),
        approved_by,
    };
    let state = run_in_slot(&service, Then::Answer, move |service| async move {
        approvals::approve(&service, id.as_str(), request).await
    });
    Ok(Json(state.await?))
}

async fn reject_run(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    body: Result<ObjectBody<RejectBody>, ApiError>,
) -> Result<Json<BridgeState>, ApiError> {
    let id = run_id(id)?;
    let ObjectBody(body) = body?;
    let reason = optional_text(body.reason, "reason", MAX_REASON_CHARS)?;
    let state = run_in_slot(&service, Then::Answer, move |service| async move {
        approvals::reject(&service, id.as_str(), reason).await
    });
    Ok(Json(state.await?))
}

/// Answers the question of a `waiting_input` bridge run and continues its
/// agent run: an answer `planrun answer` would refuse is 422
/// `invalid_answer`, before anything is opened.
async fn answer_run(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    body: Result<ObjectBody<AnswerBody>, ApiError>,
) -> Result<Json<BridgeState>, ApiError> {
    let id = run_id(id)?;
    let ObjectBody(body) = body?;
    crate::ops::check_answer(&body.answer)
        .map_err(|message| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_answer", message))?;
    let state = run_in_slot(&service, Then::Answer, move |service| async move {
        approvals::answer(&service, id.as_str(), body.answer).await
    });
    Ok(Json(state.await?))
}

/// An optional text field: too long or holding control characters (checked
/// on the text as sent, as the published schema's `maxLength` and `pattern`
/// do) is refused; then it is trimmed, and empty is absent.
fn optional_text(text: Option<String>, field: &str, max_chars: usize) -> Result<Option<String>, ApiError> {
    let Some(text) = text else {
        return Ok(None);
    };
    check_decision_text(field, &text, max_chars).map_err(invalid)?;
    Ok(Some(text.trim().to_string()).filter(|text| !text.is_empty()))
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message)
}

async fn create_controller_run(
    State(service): State<Arc<Service>>,
    body: Result<ObjectBody<ControllerBody>, ApiError>,
) -> Result<Response, ApiError> {
    let ObjectBody(body) = body?;
    let goal = check_goal(body.goal)?;
    let inputs = check_inputs(&service, &goal, AdapterKind::Agent, body.inputs)?;
    let state = run_in_slot(&service, Then::Answer, move |service| async move {
        controller::execute(&service, &goal, inputs).await
    })
    .await?;
    Ok((StatusCode::CREATED, Json(state)).into_response())
}

async fn get_controller_run(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let id = run_id(id)?;
    service
        .read_record(RecordKind::Controller, id.as_str())?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("controller run", id.as_str()))
}

async fn get_openapi(State(service): State<Arc<Service>>) -> Json<Value> {
    Json(openapi::document(service.api_token.is_some()))
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint; see `GET /openapi.json`")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "method not allowed on this endpoint")
}

/// Checks the bearer token when `PLANRUN_API_TOKEN` is set.
async fn require_token(State(service): State<Arc<Service>>, request: Request, next: Next) -> Response {
    if let Some(expected) = &service.api_token {
        let given =
            request.headers().get(header::AUTHORIZATION).and_then(|value| value.to_str().ok()).and_then(bearer_token);
        if !given.is_some_and(|given| tokens_match(given, expected)) {
            let mut response = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "missing or wrong bearer token (`Authorization: Bearer <token>`)",
            )
            .into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    next.run(request).await
}

/// The token of an `Authorization: Bearer <token>` value; the scheme's name
/// is case-insensitive (RFC 9110, section 11.1).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim_start_matches(' '))
}

/// Constant-time comparison (of digests, so lengths leak nothing either).
fn tokens_match(given: &str, expected: &str) -> bool {
    let given = Sha256::digest(given.as_bytes());
    let expected = Sha256::digest(expected.as_bytes());
    bool::from(given.as_slice().ct_eq(expected.as_slice()))
}

/// A request's `inputs`: an object, given to the `agent` adapter only, and
/// fitting the plan the goal routes to (422 `invalid_inputs` naming the
/// input otherwise). A goal that routes nowhere is left to the run.
fn check_inputs(
    service: &Service,
    goal: &str,
    adapter: AdapterKind,
    inputs: Option<Value>,
) -> Result<Map<String, Value>, ApiError> {
    let invalid = |message: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_inputs", message);
    let inputs = match inputs {
        None => Map::new(),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(invalid(format!(
                "`inputs` is an object of input names and values, found {}",
                crate::model::json_type(&other)
            )));
        }
    };
    if adapter != AdapterKind::Agent {
        if !inputs.is_empty() {
            return Err(invalid(format!("`inputs` are given to the `agent` adapter only, not `{}`", adapter.name())));
        }
        return Ok(inputs);
    }
    service.adapters.agent.check_inputs(goal, &inputs).map_err(|error| invalid(error.to_string()))?;
    Ok(inputs)
}

/// A goal holds a character that is not Unicode white space (`char::is_whitespace`,
/// the set the schema's pattern lists).
fn check_goal(goal: String) -> Result<String, ApiError> {
    if crate::router::goal_is_blank(&goal) {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", "`goal` must not be empty"));
    }
    Ok(goal)
}

/// The run id of the path: a path that is not valid UTF-8 once decoded
/// (`/runs/%FF`) or not a run id is a JSON 400, like every error.
fn run_id(path: Result<Path<String>, PathRejection>) -> Result<RunId, ApiError> {
    let invalid_id = |message: String| ApiError::new(StatusCode::BAD_REQUEST, "invalid_run_id", message);
    let Path(id) =
        path.map_err(|rejection| invalid_id(format!("invalid run id in the path: {}", rejection.body_text())))?;
    RunId::parse(&id).map_err(|error| invalid_id(error.to_string()))
}

/// JSON Schema's `integer` is any number with a zero fractional part
/// (`604800.0` included); serde's `u64` alone refuses the float form.
mod json_integer {
    use serde::{Deserialize, Deserializer, de::Error};
    use serde_json::Number;

    fn from_number<E: Error>(number: &Number) -> Result<u64, E> {
        if let Some(value) = number.as_u64() {
            return Ok(value);
        }
        match number.as_f64() {
            // 2^64 is exact in f64; anything below it with no fraction fits.
            Some(value) if value.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&value) => {
                Ok(value as u64)
            }
            _ => Err(E::custom(format!("invalid value: {number}, expected a non-negative integer"))),
        }
    }

    pub fn required<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        from_number(&Number::deserialize(deserializer)?)
    }

    pub fn optional<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
        Option::<Number>::deserialize(deserializer)?.map(|number| from_number(&number)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(tokens_match("s3cret", "s3cret"));
        assert!(!tokens_match("s3cret", "s3cre"));
        assert!(!tokens_match("", "s3cret"));
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in ["Bearer s3cret", "bearer s3cret", "BEARER s3cret", "Bearer  s3cret"] {
            assert_eq!(bearer_token(value), Some("s3cret"), "{value}");
        }
        for value in ["Basic s3cret", "Bearers3cret", "s3cret", "Token s3cret"] {
            assert_eq!(bearer_token(value), None, "{value}");
        }
    }
}
