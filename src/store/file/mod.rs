//! The file store: runs, records and receipts as folders and files under
//! the workspace.

pub(crate) mod atomic;
pub(crate) mod audit_log;
pub(crate) mod child_note;
pub(crate) mod file_store;
pub(crate) mod folders;
pub(crate) mod group_commit;
pub(crate) mod history_log;
pub(crate) mod lease;
pub(crate) mod receipts;
pub(crate) mod record_dir;
pub(crate) mod run_dir;
pub(crate) mod run_load;
pub(crate) mod run_repair;

use crate::store::backend::{Backend, OpenError, StoreOptions};
use crate::store::{FileStores, StoreFactory};

/// `--store file` (the default): nothing to parse, connect or migrate.
pub(crate) struct FileBackend;

impl Backend for FileBackend {
    fn open(&self, _location: &str, _options: StoreOptions<'_>) -> Result<Box<dyn StoreFactory>, OpenError> {
        Ok(Box::new(FileStores))
    }
}
