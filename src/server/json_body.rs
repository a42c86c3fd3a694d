//! A request body that must be one strict JSON object, as the published
//! schema says of every body. Axum's `Json<T>` into a struct would also
//! take an array of the fields' values in order (`["goal", "stub", true]`):
//! serde reads a struct from a sequence too; and serde_json keeps the last
//! of two equal keys (`{"goal": "a", "goal": "b"}` would run `b`). This
//! extractor reads the body with the strict reader ([`crate::strict_json`]):
//! a duplicate key, `NaN`/`Infinity`, trailing data or any other syntax
//! error is 400 `malformed_json` naming it, anything but an object 422
//! `invalid_body`, then the fields (422 `invalid_body`); a missing JSON
//! content type is 415 and a body over the limit 413, as with `Json<T>`.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;

use crate::server::error::ApiError;
use crate::strict_json;

/// The body, read from a JSON object.
pub struct ObjectBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ObjectBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        if !json_content_type(request.headers()) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "Expected request with `Content-Type: application/json`",
            ));
        }
        let bytes = Bytes::from_request(request, state).await.map_err(|rejection| {
            let status = rejection.status();
            let code = if status == StatusCode::PAYLOAD_TOO_LARGE { "body_too_large" } else { "invalid_request" };
            ApiError::new(status, code, rejection.body_text())
        })?;
        let value = strict_json::parse_slice(&bytes).map_err(|error| {
            ApiError::new(StatusCode::BAD_REQUEST, "malformed_json", format!("the body is not strict JSON: {error}"))
        })?;
        if !value.is_object() {
            return Err(invalid_body("the body must be a JSON object".to_string()));
        }
        strict_json::from_value(value)
            .map(ObjectBody)
            .map_err(|error| invalid_body(format!("Failed to deserialize the JSON body into the target type: {error}")))
    }
}

/// `application/json` or `application/<something>+json`, with any
/// parameters (as `Json<T>` accepts).
fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn invalid_body(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message)
}
