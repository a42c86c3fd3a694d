//! The compare-and-set of checkpoints: a writer names the `state_version`
//! it expects to replace, and every store refuses any other.

use crate::store::StoreError;

/// Refuses a checkpoint whose expected version is not the stored one.
pub(crate) fn compare_version(id: &str, stored: u64, expected: u64) -> Result<(), StoreError> {
    if stored == expected {
        Ok(())
    } else {
        Err(StoreError::VersionConflict { id: id.to_string(), expected, found: stored })
    }
}
