//! Reading a plan, policy or scenario file into the source map: its format
//! by extension, its bytes (at most [`MAX_FILE_BYTES`], regular files only)
//! or a queued run's copy of it, its digest. Parsing is `parse.rs`'s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::diag::{Diagnostic, SourceFile, SourceId, SourceMap, display_path};
use crate::digest::sha256_hex;
use crate::model::SourceRef;

/// The file formats planrun reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Toml,
    Yaml,
}

/// The extensions of the files planrun reads, in the order a file named
/// without one is looked for.
pub(crate) const EXTENSIONS: [&str; 3] = ["toml", "yaml", "yml"];

impl Format {
    /// The format for a file name, by extension.
    pub(crate) fn of(path: &Path) -> Option<Format> {
        match path.extension().and_then(|extension| extension.to_str()) {
            Some("toml") => Some(Format::Toml),
            Some("yaml" | "yml") => Some(Format::Yaml),
            _ => None,
        }
    }
}

/// A file read into the source map.
#[derive(Debug, Clone)]
pub(crate) struct ReadFile {
    pub id: SourceId,
    pub source: SourceRef,
    pub format: Format,
}

/// Files given as text instead of read from disk, by the path they were
/// read from (a queued run's copies: see [`crate::load::Loader::from_copies`]).
pub type Copies = BTreeMap<PathBuf, String>;

/// Reads `path` into `sources` (from `copies` when given: then only from
/// them, named exactly as given). Reports `unsupported-extension` and
/// `io-error` (both without a span) and returns `None` on either.
pub(crate) fn read(
    sources: &mut SourceMap,
    diagnostics: &mut Vec<Diagnostic>,
    path: &Path,
    copies: Option<&Copies>,
) -> Option<ReadFile> {
    let name = if copies.is_some() { path.display().to_string() } else { display_path(path) };
    let Some(format) = Format::of(path) else {
        // A missing file is named missing, whatever its name ends in (a
        // readable file's open says so below: no second look on that path).
        if let (None, Err(error)) = (copies, std::fs::metadata(path)) {
            diagnostics.push(Diagnostic::error("io-error", format!("cannot read `{name}`: {error}")));
            return None;
        }
        diagnostics.push(
            Diagnostic::error("unsupported-extension", format!("cannot read `{name}`: unsupported file extension"))
                .with_help("plan and policy files end in `.toml`, `.yaml` or `.yml`"),
        );
        return None;
    };
    let bytes = match copies {
        Some(copies) => match copies.get(path) {
            Some(text) => text.clone().into_bytes(),
            None => {
                diagnostics.push(Diagnostic::error(
                    "io-error",
                    format!("cannot read `{name}`: it is not among the files the run was submitted with"),
                ));
                return None;
            }
        },
        None => match read_limited(path) {
            Ok(bytes) => bytes,
            Err(reason) => {
                diagnostics.push(Diagnostic::error("io-error", format!("cannot read `{name}`: {reason}")));
                return None;
            }
        },
    };
    let sha256 = sha256_hex(&bytes);
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => {
            diagnostics.push(Diagnostic::error(
                "io-error",
                format!("cannot read `{name}`: the file is not valid UTF-8 ({error})"),
            ));
            return None;
        }
    };
    let id = sources.add(SourceFile::new(name.clone(), text));
    Some(ReadFile { id, source: SourceRef { path: name, sha256 }, format })
}

/// The largest plan, policy or scenario file read (4 MiB): a file is read
/// whole into memory, so a bigger one (or an endless one behind a link) is
/// refused before it is.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The bytes of regular file `path`, at most [`MAX_FILE_BYTES`]. Opened
/// without blocking and checked on the open file, so a FIFO or a device
/// (`/dev/zero` behind a link) is refused at once instead of hanging or
/// filling memory.
fn read_limited(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;

    let nonblocking = rustix::fs::OFlags::NONBLOCK.bits() as i32;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nonblocking)
        .open(path)
        .map_err(|error| error.to_string())?;
    let metadata = file.metadata().map_err(|error| error.to_string())?;
    if !metadata.is_file() {
        return Err("not a regular file".to_string());
    }
    let too_big = || format!("larger than {} MiB, the most a plan or policy file may be", MAX_FILE_BYTES >> 20);
    if metadata.len() > MAX_FILE_BYTES {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    // Bounded again while reading: the file may grow after the check.
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|error| error.to_string())?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big());
    }
    Ok(bytes)
}
