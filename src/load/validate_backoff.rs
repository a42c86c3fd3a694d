//! `retry_backoff`: the policy's `[retry_backoff]` section and a step's own
//! `retry_backoff` table, read by one function (the step's keys are the
//! policy's, each optional).

use crate::diag::Diagnostic;
use crate::load::keys::{RETRY_BACKOFF, STEP_BACKOFF};
use crate::load::node::Node;
use crate::load::table::{TableReader, empty_table, section};
use crate::model::{BackoffOverride, Jitter, RetryBackoff};

/// The policy's `[retry_backoff]`, defaults filled in; `None` after a
/// reported error.
pub(crate) fn policy_backoff(node: Option<&Node>, diagnostics: &mut Vec<Diagnostic>) -> Option<RetryBackoff> {
    let empty = empty_table();
    let mut reader = section(node, "retry_backoff", RETRY_BACKOFF.keys, &empty, diagnostics)?;
    let given = read(&mut reader, diagnostics)?;
    reader.finish(diagnostics);
    Some(RetryBackoff::default().with_all(&given))
}

/// A step's `retry_backoff` table; `None` when absent or after an error.
pub(crate) fn step_backoff(node: &Node, diagnostics: &mut Vec<Diagnostic>) -> Option<BackoffOverride> {
    let mut reader = TableReader::new(node, "`retry_backoff`", " in `retry_backoff`", STEP_BACKOFF.keys, diagnostics)?;
    let given = read(&mut reader, diagnostics);
    reader.finish(diagnostics);
    given
}

fn read(reader: &mut TableReader<'_>, diagnostics: &mut Vec<Diagnostic>) -> Option<BackoffOverride> {
    let errors = diagnostics.len();
    let millis = |reader: &mut TableReader<'_>, key: &str, diagnostics: &mut Vec<Diagnostic>| {
        reader.integer(key, 0, diagnostics).map(|(ms, _)| ms.unsigned_abs())
    };
    let initial_ms = millis(reader, "initial_ms", diagnostics);
    let max_ms = millis(reader, "max_ms", diagnostics);
    let multiplier =
        reader.integer("multiplier", 1, diagnostics).map(|(factor, _)| u32::try_from(factor).unwrap_or(u32::MAX));
    let jitter = reader.choice("jitter", "`jitter`", &Jitter::NAMES, diagnostics).flatten();
    (diagnostics.len() == errors).then_some(BackoffOverride { initial_ms, max_ms, multiplier, jitter })
}
