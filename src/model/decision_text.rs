//! The limits on what a person writes into a run's log when deciding it:
//! who approved, why a run was rejected or cancelled, how long an approval
//! stays valid. The command line and the service apply the same ones, so a
//! log holds the same kind of text whichever front end wrote it.

/// The most characters of an approver's name (`--by`, `approved_by`).
pub const MAX_NAME_CHARS: usize = 200;
/// The most characters of a reason (`--reason`, `reason`).
pub const MAX_REASON_CHARS: usize = 2000;
/// The longest an approval stays valid (`--expires-in`, `expires_in_secs`):
/// seven days.
pub const MAX_APPROVAL_SECS: u64 = 7 * 86_400;

/// Refuses `text` (the value of `field`) when it is longer than `max_chars`
/// or holds a control character (a newline or a terminal escape would be
/// written into the log as it is).
pub fn check_decision_text(field: &str, text: &str, max_chars: usize) -> Result<(), String> {
    if text.chars().count() > max_chars || text.chars().any(char::is_control) {
        return Err(format!("`{field}` must be at most {max_chars} characters, without control characters"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_and_control_characters_are_refused() {
        assert!(check_decision_text("reason", "not needed: ticket is a duplicate", MAX_REASON_CHARS).is_ok());
        assert!(check_decision_text("by", &"x".repeat(MAX_NAME_CHARS), MAX_NAME_CHARS).is_ok());
        assert!(check_decision_text("by", &"x".repeat(MAX_NAME_CHARS + 1), MAX_NAME_CHARS).is_err());
        for bad in ["evil\nFAKE", "\u{1b}[31mred", "tab\there"] {
            let error = check_decision_text("by", bad, MAX_NAME_CHARS).expect_err(bad);
            assert!(error.contains("without control characters"), "{error}");
        }
    }
}
