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

/// The 1-based number of the first line of `old` that `new` changes
/// (one past the last line when `new` only appends); `None` when equal.
pub fn first_changed_line(old: &str, new: &str) -> Option<usize> {
    let mut old_lines = old.lines();
    let mut new_lines = new.lines();
    let mut number = 1;
    loop {
        match (old_lines.next(), new_lines.next()) {
            (None, None) => return None,
            (Some(a), Some(b)) if a == b => number += 1,
            _ => return Some(number),
        }
    }
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
    fn the_first_changed_line_is_counted_from_one() {
        assert_eq!(first_changed_line("a\nb\nc", "a\nx\nc"), Some(2));
        assert_eq!(first_changed_line("a", "a\nb"), Some(2));
        assert_eq!(first_changed_line("a\nb", "a\nb"), None);
    }

    #[test]
    fn a_changed_line_shows_as_removed_and_added_with_context() {
        let diff = unified_diff("one\ntwo\nthree\n", "one\n2\nthree\n", "snap", "new");
        assert_eq!(diff, "--- snap\n+++ new\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n");
    }
}
