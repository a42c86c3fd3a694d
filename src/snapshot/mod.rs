//! Golden snapshot files in insta's `.snap` format, and the unified diff a
//! reviewer reads when one no longer matches.
//!
//! - `snap_file.rs`: one `.snap` file: the `---` metadata header
//!   (`source:`, `expression:` …) and the body; reading, writing, matching
//!   (trailing whitespace and CRLF ignored, as insta does) and the
//!   `.snap.new` file of a pending change, so `cargo insta review` and
//!   `planrun test --review` both work on the same files.
//! - `diff.rs`: the unified diff of two bodies.
//!
//! The engine knows nothing of scenarios: `ops::test` decides what to
//! snapshot and where.

mod diff;
mod snap_file;

pub use diff::unified_diff;
pub use snap_file::{SnapFile, SnapshotError, new_path, normalize_body, snap_path};
