//! [`ServiceError`]: a failure of the service itself.

use crate::store::StoreError;

/// A failure of the service itself (not of a run: a failed run is a result).
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Records(#[from] StoreError),
}
