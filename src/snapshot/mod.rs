//! Golden snapshot files in insta's `.snap` format, what a record reads as
//! in one, and the unified diff a reviewer reads when one no longer
//! matches.
//!
//! - `snap_file.rs`: one `.snap` file: the `---` metadata header
//!   (`source:`, `expression:` …) and the body; reading, writing, matching
//!   (trailing whitespace and CRLF ignored, as insta does) and the
//!   `.snap.new` file of a pending change, so `cargo insta review` and
//!   `planrun test --review` both work on the same files.
//! - `render.rs`: a record file as a snapshot shows it: pretty JSON, one
//!   block per event, texts split by line, a head line's checkpoint shown
//!   as what it adds.
//! - `placeholders.rs`: digests (links, seals, file digests, fingerprints)
//!   as numbered placeholders, `[hash-1]` ….
//! - `diff.rs`: the unified diff of two bodies.
//!
//! The engine knows nothing of scenarios: `ops::test` decides what to
//! snapshot and where.

mod diff;
mod placeholders;
mod render;
mod snap_file;

pub use diff::{first_changed_line, unified_diff};
pub use placeholders::hash_placeholders;
pub use render::render_record;
pub use snap_file::{SnapFile, SnapshotError, new_path, normalize_body, snap_path};
