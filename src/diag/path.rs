//! The one way a path is shown to users, in diagnostics, previews, run
//! summaries and errors: relative to the current directory when it is below
//! it, else as given.

use std::path::Path;

/// `path` as the user would write it: relative to the current directory
/// when it lies below it (compared as given when absolute, then with
/// symlinks resolved, so `/tmp` behind a link still shortens), else exactly
/// as given. A path naming the current directory itself stays as given
/// rather than becoming empty.
pub fn display_path(path: &Path) -> String {
    let Ok(cwd) = std::env::current_dir() else {
        return path.display().to_string();
    };
    let below = |path: &Path, cwd: &Path| {
        path.strip_prefix(cwd).ok().filter(|relative| !relative.as_os_str().is_empty()).map(Path::to_path_buf)
    };
    let lexical = path.is_absolute().then(|| below(path, &cwd)).flatten();
    let relative = lexical.or_else(|| {
        let (canonical, cwd) = (path.canonicalize().ok()?, cwd.canonicalize().ok()?);
        below(&canonical, &cwd)
    });
    relative.as_deref().unwrap_or(path).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_below_the_current_directory_are_shown_relative() {
        let cwd = std::env::current_dir().expect("cwd");
        assert_eq!(display_path(&cwd.join("plans/flow_pwd.toml")), "plans/flow_pwd.toml");
        assert_eq!(display_path(Path::new("plans/flow_pwd.toml")), "plans/flow_pwd.toml");
        assert_eq!(display_path(&cwd), cwd.display().to_string());
        assert_eq!(display_path(Path::new("/nonexistent/x.toml")), "/nonexistent/x.toml");
        assert_eq!(display_path(Path::new("missing/./x.toml")), "missing/./x.toml");
    }
}
