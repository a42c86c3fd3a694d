//! The workspace's identity, `<workspace>/.planrun/id`: the name a shared
//! (database) store files the workspace's runs and receipts under, so that
//! two machines mounting one workspace at different paths share its runs,
//! and a worker claims only the runs of the workspace it has mounted.
//!
//! The file holds one id (`[A-Za-z0-9._-]{1,64}`, a newline after it). On
//! first use of a database store it is created with a fresh id from the
//! caller (the injected id generator). Creation is race-free: the id is
//! written to a private temp file and hard-linked into place, which fails
//! when another process got there first; its id then wins and is read
//! back, so every process of the workspace ends with the same id. The file
//! store does not use it (its runs are the workspace's own folders).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::store::validate_run_id;

/// Where the id is kept, under the workspace.
pub fn workspace_id_path(workspace: &Path) -> PathBuf {
    workspace.join(".planrun").join("id")
}

/// Why the workspace's id cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceIdError {
    #[error("cannot {action} the workspace id `{}`: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "the workspace id `{}` is not a valid id (1 to 64 ASCII letters, digits, `.`, `_` or `-` on one line): fix or remove the file (a new id splits the workspace from the runs filed under the old one)",
        path.display()
    )]
    Invalid { path: PathBuf },
}

/// The id in `<workspace>/.planrun/id`, creating the file with `fresh()`
/// (and the folders above it) when there is none.
pub fn read_or_create(workspace: &Path, fresh: impl FnOnce() -> String) -> Result<String, WorkspaceIdError> {
    let path = workspace_id_path(workspace);
    if let Some(id) = read(&path)? {
        return Ok(id);
    }
    let io = |action: &'static str| {
        let path = path.clone();
        move |source| WorkspaceIdError::Io { action, path, source }
    };
    let folder = path.parent().unwrap_or(workspace);
    fs::create_dir_all(folder).map_err(io("create the folder of"))?;
    let id = fresh();
    if validate_run_id(&id).is_err() {
        return Err(WorkspaceIdError::Invalid { path: path.clone() });
    }
    let temp = folder.join(format!(".id.{}.tmp", std::process::id()));
    {
        let mut file = fs::File::create(&temp).map_err(io("write"))?;
        file.write_all(format!("{id}\n").as_bytes()).map_err(io("write"))?;
        file.sync_all().map_err(io("write"))?;
    }
    let linked = fs::hard_link(&temp, &path);
    let _ = fs::remove_file(&temp);
    match linked {
        Ok(()) => {
            fs::File::open(folder).and_then(|folder| folder.sync_all()).map_err(io("write"))?;
            Ok(id)
        }
        // Another process created it first: its id is the workspace's.
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
            read(&path)?.ok_or_else(|| WorkspaceIdError::Invalid { path: path.clone() })
        }
        Err(error) => Err(io("create")(error)),
    }
}

/// The id in `<workspace>/.planrun/id`; `None` when there is no such file.
pub fn read_existing(workspace: &Path) -> Result<Option<String>, WorkspaceIdError> {
    read(&workspace_id_path(workspace))
}

/// The id in `path`; `None` when there is no such file.
fn read(path: &Path) -> Result<Option<String>, WorkspaceIdError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(WorkspaceIdError::Io { action: "read", path: path.to_path_buf(), source }),
    };
    let id = text.strip_suffix('\n').unwrap_or(&text);
    if validate_run_id(id).is_err() {
        return Err(WorkspaceIdError::Invalid { path: path.to_path_buf() });
    }
    Ok(Some(id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_id_is_kept_and_a_bad_file_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = dir.path().join("ws");
        let first = read_or_create(&workspace, || "ws-0001".to_string()).expect("created");
        assert_eq!(first, "ws-0001");
        let mut asked = 0;
        let again = read_or_create(&workspace, || {
            asked += 1;
            "ws-0002".to_string()
        })
        .expect("read back");
        assert_eq!((again.as_str(), asked), ("ws-0001", 0), "an existing id is kept, no new one made");
        assert_eq!(fs::read_to_string(workspace_id_path(&workspace)).expect("file"), "ws-0001\n");
        fs::write(workspace_id_path(&workspace), "two words\n").expect("edit");
        assert!(matches!(read_or_create(&workspace, || "x".into()), Err(WorkspaceIdError::Invalid { .. })));
        let leftovers = fs::read_dir(workspace.join(".planrun")).expect("folder").count();
        assert_eq!(leftovers, 1, "no temp file left behind");
    }
}
