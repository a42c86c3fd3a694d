//! Loading plan and policy files into the validated model.
//!
//! `loader.rs` reads a file and parses TOML or YAML (by extension) into a
//! spanned document tree (`node.rs`); `validate_plan.rs` and
//! `validate_policy.rs` turn trees into [`crate::model::Plan`] and
//! [`crate::model::Policy`], collecting every finding of a file in one pass;
//! `catalog.rs` checks what only shows across files (routing, references
//! from plans to policies, plan settings against the policy).
