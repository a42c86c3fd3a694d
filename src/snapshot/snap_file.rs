//! One insta `.snap` file: a YAML metadata header between `---` lines, then
//! the snapshot body.
//!
//! ```text
//! ---
//! source: plans/flow_ls.scenarios.toml
//! ---
//! exit_code: 0
//! …
//! ```
//!
//! Matching follows insta: trailing whitespace is ignored and CRLF reads as
//! LF, so a file insta wrote matches here and the reverse. A matching file
//! is never rewritten, so its header (`source: tests/scenarios.rs` in files
//! insta wrote) stays byte-identical. A pending change goes to
//! `<name>.snap.new` beside it, the file `cargo insta review` looks for.

use std::path::{Path, PathBuf};

/// A snapshot file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot read snapshot `{path}`: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("cannot write snapshot `{path}`: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("`{path}` is not an insta snapshot: {reason}")]
    Format { path: String, reason: &'static str },
}

/// The header fields (in file order, values as written) and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapFile {
    pub metadata: Vec<(String, String)>,
    pub body: String,
}

/// `<dir>/<name>.snap`.
pub fn snap_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.snap"))
}

/// The pending file of `snap`: `<name>.snap.new`.
pub fn new_path(snap: &Path) -> PathBuf {
    let mut name = snap.as_os_str().to_os_string();
    name.push(".new");
    PathBuf::from(name)
}

/// A body as insta compares it: trailing whitespace dropped, CRLF as LF.
pub fn normalize_body(body: &str) -> String {
    body.trim_end().replace("\r\n", "\n")
}

impl SnapFile {
    /// A new snapshot whose header names its `source`.
    pub fn new(source: &str, body: &str) -> SnapFile {
        SnapFile { metadata: vec![("source".to_string(), yaml_scalar(source))], body: normalize_body(body) }
    }

    /// Parses the text of a `.snap` file; `path` is for messages.
    pub fn parse(text: &str, path: &Path) -> Result<SnapFile, SnapshotError> {
        let format = |reason| SnapshotError::Format { path: path.display().to_string(), reason };
        let mut lines = text.lines();
        if lines.next().map(str::trim_end) != Some("---") {
            return Err(format("the first line is not `---`"));
        }
        let mut metadata = Vec::new();
        let mut closed = false;
        for line in lines.by_ref() {
            if line.trim_end() == "---" {
                closed = true;
                break;
            }
            let Some((key, value)) = line.split_once(':') else {
                return Err(format("a header line is not `key: value`"));
            };
            metadata.push((key.trim().to_string(), value.trim().to_string()));
        }
        if !closed {
            return Err(format("the header has no closing `---`"));
        }
        Ok(SnapFile { metadata, body: lines.collect::<Vec<_>>().join("\n") })
    }

    /// Reads `path`; `None` when there is no such file.
    pub fn read(path: &Path) -> Result<Option<SnapFile>, SnapshotError> {
        match std::fs::read_to_string(path) {
            Ok(text) => SnapFile::parse(&text, path).map(Some),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(SnapshotError::Read { path: path.display().to_string(), source }),
        }
    }

    /// The file's text: header, body and one final newline.
    pub fn render(&self) -> String {
        let mut text = String::from("---\n");
        for (key, value) in &self.metadata {
            text.push_str(&format!("{key}: {value}\n"));
        }
        text.push_str("---\n");
        text.push_str(&normalize_body(&self.body));
        text.push('\n');
        text
    }

    /// Writes the file (creating its folder).
    pub fn write(&self, path: &Path) -> Result<(), SnapshotError> {
        let write = |source| SnapshotError::Write { path: path.display().to_string(), source };
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).map_err(write)?;
        }
        std::fs::write(path, self.render()).map_err(write)
    }

    /// Whether `body` is what this snapshot holds.
    pub fn matches(&self, body: &str) -> bool {
        normalize_body(&self.body) == normalize_body(body)
    }
}

/// `text` as a YAML scalar: plain when that reads back as the same string,
/// else double-quoted.
fn yaml_scalar(text: &str) -> String {
    let plain = !text.is_empty()
        && !text.contains(": ")
        && !text.contains(" #")
        && !text.starts_with(|first: char| "!&*-?{}[],#|>@`\"'%: ".contains(first))
        && !text.ends_with(' ')
        && !text.chars().any(char::is_control);
    if plain { text.to_string() } else { serde_json::to_string(text).unwrap_or_default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INSTA: &str = "---\nsource: tests/scenarios.rs\n---\nexit_code: 0\n----- stdout -----\n";

    #[test]
    fn a_file_insta_wrote_parses_and_renders_back_byte_for_byte() {
        let file = SnapFile::parse(INSTA, Path::new("x.snap")).expect("parses");
        assert_eq!(file.metadata, vec![("source".to_string(), "tests/scenarios.rs".to_string())]);
        assert_eq!(file.body, "exit_code: 0\n----- stdout -----");
        assert_eq!(file.render(), INSTA);
    }

    #[test]
    fn matching_ignores_trailing_whitespace_and_crlf_only() {
        let file = SnapFile::parse(INSTA, Path::new("x.snap")).expect("parses");
        assert!(file.matches("exit_code: 0\r\n----- stdout -----\n\n"));
        assert!(!file.matches("exit_code: 1\n----- stdout -----\n"));
        assert!(!file.matches(" exit_code: 0\n----- stdout -----\n"), "leading space is content");
    }

    #[test]
    fn a_new_snapshot_names_its_source_and_ends_in_one_newline() {
        let file = SnapFile::new("plans/a.scenarios.toml", "body\n\n");
        assert_eq!(file.render(), "---\nsource: plans/a.scenarios.toml\n---\nbody\n");
        assert_eq!(SnapFile::new("a: b", "x").metadata[0].1, "\"a: b\"");
    }

    #[test]
    fn a_file_without_the_header_is_refused_with_the_reason() {
        let error = SnapFile::parse("exit_code: 0\n", Path::new("x.snap")).expect_err("no header");
        assert_eq!(error.to_string(), "`x.snap` is not an insta snapshot: the first line is not `---`");
        let error = SnapFile::parse("---\nsource: x\n", Path::new("x.snap")).expect_err("unclosed");
        assert!(error.to_string().contains("no closing `---`"), "{error}");
    }

    #[test]
    fn the_pending_file_is_beside_the_snapshot() {
        assert_eq!(new_path(Path::new("s/a@cli.snap")), PathBuf::from("s/a@cli.snap.new"));
        assert_eq!(snap_path(Path::new("s"), "a@cli"), PathBuf::from("s/a@cli.snap"));
    }
}
