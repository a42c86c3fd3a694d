//! Confinement: the checks that keep every action inside the workspace and
//! the policy's search path. They sit below the policy, the loader, the
//! preview and the tools, which all ask the same questions:
//!
//! - `workspace`: the confined [`Workspace`] handle and the lexical
//!   [`PathRules`] (components, `..`, protected folders, `files.deny`).
//! - `program`: bare program names and the [`ProgramResolver`].

mod program;
mod workspace;

pub use program::{ProgramResolver, ResolveError, ResolvedProgram, is_bare_name};
pub use workspace::{CheckedPath, CwdRefused, PathDenied, PathRules, Workspace, is_within, readable_protected};
