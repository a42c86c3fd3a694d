//! Run ids: [`RunId`], an id checked once where it comes in (a
//! command-line argument, an HTTP path, a record), and the check itself.

/// Why a run id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid run id `{id}`: {reason}")]
pub struct RunIdError {
    pub id: String,
    pub reason: &'static str,
}

/// A run id that passed [`validate_run_id`]: whatever takes a `RunId` needs
/// no check of its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(String);

impl RunId {
    /// Checks `id` (see [`validate_run_id`]).
    pub fn parse(id: &str) -> Result<RunId, RunIdError> {
        validate_run_id(id)?;
        Ok(RunId(id.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::fmt::Display for RunId {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl AsRef<str> for RunId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Accepts `[A-Za-z0-9._-]{1,64}` except `.` and `..`: a run id is a
/// folder name under `runs/` and must never name anything else.
pub fn validate_run_id(id: &str) -> Result<(), RunIdError> {
    let refuse = |reason| Err(RunIdError { id: id.to_string(), reason });
    if id.is_empty() || id.len() > 64 {
        return refuse("a run id has 1 to 64 characters");
    }
    if id == "." || id == ".." {
        return refuse("`.` and `..` are not run ids");
    }
    if !id.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-')) {
        return refuse("a run id may hold only ASCII letters, digits, `.`, `_` and `-`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_alphabet_only() {
        for ok in ["my-run-01", "a", "A.b_c-9", &"x".repeat(64)] {
            assert!(validate_run_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "../x", "a b", "é", &"x".repeat(65), "a\0b"] {
            assert!(validate_run_id(bad).is_err(), "{bad:?}");
        }
    }
}
