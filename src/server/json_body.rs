//! A request body that must be one JSON object, as the published schema
//! says of every body. Axum's `Json<T>` into a struct would also take an
//! array of the fields' values in order (`["goal", "stub", true]`): serde
//! reads a struct from a sequence too. This extractor reads the JSON first
//! and refuses anything but an object (422 `invalid_body`), then the
//! fields, with the same codes and statuses as `Json<T>`.

use axum::Json;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::server::error::ApiError;

/// The body, read from a JSON object.
pub struct ObjectBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ObjectBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let Json(value) = Json::<Value>::from_request(request, state).await?;
        if !value.is_object() {
            return Err(invalid_body("the body must be a JSON object".to_string()));
        }
        serde_json::from_value(value)
            .map(ObjectBody)
            .map_err(|error| invalid_body(format!("Failed to deserialize the JSON body into the target type: {error}")))
    }
}

fn invalid_body(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message)
}
