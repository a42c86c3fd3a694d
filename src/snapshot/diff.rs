//! The unified diff of two snapshot bodies, with `-old`/`+new` headers and
//! three lines of context, as `git diff` shows it.

use similar::TextDiff;

/// The unified diff from `old` to `new` (empty when they are equal), each
/// side labelled with `old_label` / `new_label`.
pub fn unified_diff(old: &str, new: &str, old_label: &str, new_label: &str) -> String {
    let old = with_final_newline(old);
    let new = with_final_newline(new);
    TextDiff::from_lines(&old, &new).unified_diff().context_radius(3).header(old_label, new_label).to_string()
}

/// Both sides end in a newline, so a missing one is never shown as a change.
fn with_final_newline(text: &str) -> String {
    if text.is_empty() || text.ends_with('\n') { text.to_string() } else { format!("{text}\n") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_bodies_have_no_diff() {
        assert_eq!(unified_diff("a\nb", "a\nb\n", "old", "new"), "");
    }

    #[test]
    fn a_changed_line_shows_as_removed_and_added_with_context() {
        let diff = unified_diff("one\ntwo\nthree\n", "one\n2\nthree\n", "snap", "new");
        assert_eq!(diff, "--- snap\n+++ new\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n");
    }
}
