//! The workspace: a confined directory handle. (Being implemented.)

/// The confined workspace.
pub struct Workspace;

/// A path the file tools refuse.
#[derive(Debug)]
pub struct PathDenied;
