//! Loading plan, policy and service policy files into the validated model:
//! one loader for every file the product reads.
//!
//! [`Loader`] (`loader.rs`) loads one file at a time: `read_file.rs` reads
//! it into the source map, `parse.rs` parses it by extension with
//! `parse_toml.rs` or `parse_yaml.rs` (both held to the nesting limit of
//! `nesting.rs`) into a spanned document tree (`node.rs`);
//! `validate_plan.rs` (with `validate_step.rs` for each step),
//! `validate_policy.rs` and `validate_service_policy.rs` turn trees into
//! [`crate::model::Plan`], [`crate::model::Policy`] and
//! [`crate::model::ServicePolicy`], collecting every finding of a file in one
//! pass; `lint_plan.rs` adds the per-plan errors and warnings to the
//! validated plan of `loaded_plan.rs`. `catalog.rs` loads a [`Catalog`] (the
//! plans and policies folders, or the files `planrun check` is given, also
//! against the rest of the catalog) and `cross_check.rs` checks what only
//! shows across files (references from plans to policies, plan settings
//! against the policy, and the routing checks of `route_checks.rs`).
//!
//! `validate_scenario.rs` reads the scenario files beside the plans
//! (`<plan>.scenarios.toml`), which plan and policy listings skip.
//!
//! Every validator reads tables through `table.rs`, which reports wrong
//! types, missing keys and unknown keys (with a did-you-mean,
//! `did_you_mean.rs`) uniformly. The keys of every table are declared once,
//! in `keys.rs`, each optional key's description showing its default from
//! the constant the validator reads (`defaults.rs`, or the model's);
//! `schema.rs` generates the editors' JSON Schema from the same
//! declarations.

mod catalog;
mod checked;
mod cross_check;
mod data_file;
mod defaults;
mod did_you_mean;
mod extends;
mod keys;
mod lint_plan;
mod loaded_plan;
mod loader;
mod nesting;
mod node;
mod parse;
mod parse_toml;
mod parse_yaml;
mod read_file;
mod route_checks;
mod schema;
mod table;
mod validate_agent;
mod validate_backoff;
mod validate_http_policy;
mod validate_http_step;
mod validate_inputs;
mod validate_json;
mod validate_mcp;
mod validate_plan;
mod validate_policy;
mod validate_sandbox;
mod validate_scenario;
mod validate_scenario_git;
mod validate_secrets;
mod validate_service_policy;
mod validate_step;
mod validate_when;
mod workspace_path;

pub use catalog::Catalog;
pub use checked::{CheckedFile, FileKind};
pub use defaults::{DEFAULT_FILES_DENY, DEFAULT_SEARCH_PATH};
pub use loader::Loader;
pub use node::{Key, Node, NodeValue};
pub use read_file::Copies;
pub use schema::{SchemaKind, schema, schema_text};
pub use validate_scenario::{is_scenario_file, scenario_files_for};

#[cfg(test)]
mod tests;
