//! `--store URL` / `PLANRUN_STORE`: which store keeps the runs, chosen here
//! and only here ([`open`]; [`migrate`] for `planrun store migrate`).
//!
//! - `file` (the default): the folders under `--workspace` (`runs/`,
//!   `bridge/`, `.planrun/`), as the README documents (`file/`);
//! - `postgres://…` (or `postgresql://…`): the shared PostgreSQL store
//!   (`pg/`, cargo feature `postgres`), which parses the rest of its URL
//!   and reads its own settings (`pg/options.rs`).
//!
//! The scheme picks a [`Backend`]; the backend parses its own location and
//! options. A malformed location is refused before any command reads or
//! writes a run.

use crate::store::StoreFactory;
use crate::store::backend::{Backend, LocationError, Migration, OpenError, StoreOptions, without_password};

/// The one place a `--store` value picks its backend: one arm per kind of
/// store.
fn backend(location: &str) -> Result<&'static dyn Backend, LocationError> {
    let scheme = match location.split_once("://") {
        _ if location == "file" || location.is_empty() => "file",
        Some((scheme, _)) if scheme != "file" => scheme,
        _ => "",
    };
    match scheme {
        "file" => Ok(&crate::store::file::FileBackend),
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => Ok(&crate::store::pg::PgBackend),
        #[cfg(not(feature = "postgres"))]
        "postgres" | "postgresql" => Err(LocationError::NoPostgres(without_password(location))),
        _ => Err(LocationError::Unknown(without_password(location))),
    }
}

/// Turns a `--store` value (`file`, a `postgres://` URL) into the store
/// factory of every run this process touches.
pub fn open(location: &str, options: StoreOptions<'_>) -> Result<Box<dyn StoreFactory>, OpenError> {
    let location = location.trim();
    backend(location)?.open(location, options)
}

/// Applies the missing migrations to the store at `location`; idempotent.
pub fn migrate(location: &str, options: StoreOptions<'_>) -> Result<Migration, OpenError> {
    let location = location.trim();
    backend(location)?.migrate(location, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_var(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_file_store_is_the_default_and_an_unknown_one_is_refused_with_the_password_hidden() {
        let options = StoreOptions { node_id: None, on_wait: None, var: &no_var };
        for file in ["file", "", "  file "] {
            assert!(open(file, options).is_ok(), "{file:?}");
        }
        for (unknown, shown) in [("mysql://u:secret@h/db", "mysql://u:***@h/db"), ("file://x", "file://x")] {
            let Err(OpenError::Location(refused)) = open(unknown, options) else { panic!("{unknown}: refused") };
            assert_eq!(refused, LocationError::Unknown(shown.to_string()));
        }
        assert!(matches!(migrate("file", options), Err(OpenError::NoSchema)));
        #[cfg(not(feature = "postgres"))]
        assert!(matches!(open("postgres://u@h/db", options), Err(OpenError::Location(LocationError::NoPostgres(_)))));
    }
}
