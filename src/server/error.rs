//! Typed errors and their JSON responses.
//!
//! Every error response has the body
//! `{"error": {"code": "<stable code>", "message": "<text>"}}`:
//!
//! | status | code | when |
//! |---|---|---|
//! | 400 | `malformed_json` | the body is not strict JSON: a syntax error, a duplicate key, `NaN`/`Infinity`, trailing data |
//! | 400 | `invalid_request` | a goal of white space only, a field out of range or holding control characters |
//! | 400 | `unknown_adapter` | `adapter` names no adapter |
//! | 400 | `invalid_run_id` | the path holds no valid run id (or is not UTF-8 once decoded) |
//! | 401 | `unauthorized` | missing or wrong bearer token |
//! | 404 | `run_not_found` / `not_found` | unknown run id (or a run of another workspace to change) / route |
//! | 405 | `method_not_allowed` | |
//! | 409 | `run_not_waiting` | approve/reject: the bridge run is not `waiting_approval`; answer: not `waiting_input` |
//! | 409 | `approval_invalid` | approve: fingerprint, scope or state version do not match the frozen action, or the approval expired (a shared store: also in database time, or it was used already) |
//! | 409 | `run_locked` | approve/reject: another decision on the run is in progress (this or another process) holds its lock |
//! | 409 | `refused` | approve/reject: the runtime refused (agent run not waiting, plan or policy file changed) |
//! | 409 | `records_invalid` | the bridge or controller record, or (approve/reject) the agent run's records, fail verification or are missing |
//! | 409 | `plan_files_invalid` | approve/reject: the agent run's plan or policy files are invalid now |
//! | 413 | `body_too_large` | the body exceeds the limit |
//! | 415 | `unsupported_media_type` | not `Content-Type: application/json` |
//! | 422 | `invalid_body` | JSON of the wrong shape (missing or unknown field, wrong type) |
//! | 422 | `invalid_answer` | answer: empty, white space only, or over 2000 bytes |
//! | 500 | `records_failed` | run records could not be written or read |
//! | 503 | `shutting_down` | the service is stopping |

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::ops::service::ServiceError;
use crate::ops::service::durable_task::TaskError;
use crate::ops::service::run_list::PageError;
use crate::store::StoreError;

/// An error answered to the client.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into() }
    }

    pub fn not_found(what: &str, id: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, "run_not_found", format!("no {what} `{id}`"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({"error": {"code": self.code, "message": self.message}}))).into_response()
    }
}

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        let ServiceError::Records(error) = error;
        error.into()
    }
}

/// Work run in a slot of the service: stopping (503), crashed (500), or
/// failed as its own error says.
impl<E> From<TaskError<E>> for ApiError
where
    ApiError: From<E>,
{
    fn from(error: TaskError<E>) -> Self {
        match error {
            TaskError::ShuttingDown => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", "the service is stopping")
            }
            TaskError::Crashed(error) => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "run_crashed", format!("the run task failed: {error}"))
            }
            TaskError::Work(error) => error.into(),
        }
    }
}

/// A page of bridge runs that cannot be listed.
impl From<PageError> for ApiError {
    fn from(error: PageError) -> Self {
        match error {
            PageError::Invalid(message) => ApiError::new(StatusCode::BAD_REQUEST, "invalid_paging", message),
            PageError::UnknownAfter(after) => ApiError::not_found("bridge run", &after),
            PageError::Records(error) => error.into(),
        }
    }
}

/// A bridge or controller record that is locked, fails verification or
/// cannot be written.
impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        let (status, code) = match &error {
            StoreError::Locked { .. } | StoreError::VersionConflict { .. } | StoreError::LeaseLost { .. } => {
                (StatusCode::CONFLICT, "run_locked")
            }
            StoreError::Tampered { .. } | StoreError::Corrupt { .. } | StoreError::Unreadable { .. } => {
                (StatusCode::CONFLICT, "records_invalid")
            }
            StoreError::ApprovalRefused { .. } => (StatusCode::CONFLICT, "approval_invalid"),
            StoreError::NotFound { id, .. } | StoreError::Interrupted { id, .. } => {
                return ApiError::not_found("run", id);
            }
            // Not this workspace's to change (it may be read by id).
            StoreError::OtherWorkspace { .. } => (StatusCode::NOT_FOUND, "run_not_found"),
            StoreError::Unavailable { .. } => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
            // An agent run queued and not started yet has nothing to decide.
            StoreError::Queued { .. } => (StatusCode::CONFLICT, "run_queued"),
            StoreError::RunExists { .. }
            | StoreError::ExportExists { .. }
            | StoreError::WorkspaceId(_)
            | StoreError::Io { .. }
            | StoreError::Database { .. }
            | StoreError::Unsupported(_) => (StatusCode::INTERNAL_SERVER_ERROR, "records_failed"),
        };
        ApiError::new(status, code, error.to_string())
    }
}
