//! The shape of `src/` a newcomer relies on, checked on every test run:
//! rooms stay small, facts travel as types, the use cases sit below the
//! front ends, one place picks a store, run ids are parsed once, and the
//! layering check runs in CI. `layering.rs` checks the imports (and reads
//! the tree for both: `source_files`); this module checks the rest of what
//! `src/lib.rs` promises.

use std::fs;
use std::path::{Path, PathBuf};

use crate::layering::source_files;

/// Files allowed over [`MAX_LINES`]: tests and declarative key tables.
const LONG_FILES_ALLOWED: &[&str] = &["src/load/keys.rs", "src/load/schema.rs", "src/store/conformance.rs"];

/// A room of one concern reads in one sitting.
const MAX_LINES: usize = 700;

/// Folders whose code reads facts as types, never by key: the runtime and
/// everything above it.
const TYPED_FACT_FOLDERS: &[&str] = &["src/runtime", "src/ops", "src/server", "src/cli"];

/// Ways of reading or writing a fact by its name.
const FACT_BY_KEY: &[&str] = &[
    "details.insert(",
    "details.get(\"",
    "facts.insert(",
    "facts.get(\"",
    "evidence.insert(",
    "evidence.get(\"",
    "stop_reason == Some(\"",
    "stop_reason.as_deref() == Some(\"",
];

#[test]
fn no_room_outgrows_a_sitting() {
    let mut long = Vec::new();
    for file in source_files(&root()) {
        if is_test_file(&file.path) || LONG_FILES_ALLOWED.contains(&file.path.as_str()) {
            continue;
        }
        let lines = file.text.lines().count();
        if lines > MAX_LINES {
            long.push(format!("{}: {lines} lines", file.path));
        }
    }
    assert!(long.is_empty(), "files over {MAX_LINES} lines (split them by concern):\n{}", long.join("\n"));
}

#[test]
fn the_runtime_and_front_ends_read_facts_as_types() {
    let mut found = Vec::new();
    for file in source_files(&root()) {
        if !TYPED_FACT_FOLDERS.iter().any(|folder| file.path.starts_with(&format!("{folder}/"))) {
            continue;
        }
        for (number, line) in file.text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if FACT_BY_KEY.iter().any(|pattern| code.contains(pattern)) {
                found.push(format!("{}:{}: {}", file.path, number + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "facts read or written by key:\n{}", found.join("\n"));
}

#[test]
fn the_use_cases_sit_below_the_front_ends() {
    let root = root();
    assert!(!root.join("src/runtime/control").exists(), "the control commands are use cases: they live in src/ops/");
    assert!(root.join("src/ops/service/mod.rs").is_file(), "the service's use cases live in src/ops/service/");
    let axum_in_service: Vec<String> = source_files(&root)
        .into_iter()
        .filter(|file| file.path.starts_with("src/ops/service/"))
        .filter(|file| {
            let code = code_of(&file.text);
            code.contains("axum") || code.contains("crate::server")
        })
        .map(|file| file.path)
        .collect();
    assert!(axum_in_service.is_empty(), "the service layer knows no HTTP framework: {axum_in_service:?}");
}

#[test]
fn one_place_opens_a_store_and_run_ids_are_a_type() {
    let files = source_files(&root());
    let openers: Vec<&str> = files
        .iter()
        .filter(|file| !file.path.starts_with("src/store/") && !is_test_file(&file.path))
        .filter(|file| {
            let code = code_of(&file.text);
            ["PgStores", "PgBackend", "PgLocation", "StoreLocation"].iter().any(|name| code.contains(name))
        })
        .map(|file| file.path.as_str())
        .collect();
    assert!(openers.is_empty(), "only `store::open` chooses a backend; also chosen in: {openers:?}");
    assert!(files.iter().any(|file| file.text.contains("pub struct RunId")), "a run id is parsed once, into `RunId`");
}

/// serde's names for a stateful deserializer, the one use of the word a
/// reader is taught elsewhere.
const SERDE_SEED_NAMES: &[&str] = &["DeserializeSeed", "next_element_seed", "next_value_seed", "next_key_seed"];

#[test]
fn the_code_and_docs_say_what_they_mean() {
    let root = root();
    let mut files: Vec<(String, String)> = source_files(&root).into_iter().map(|file| (file.path, file.text)).collect();
    for entry in fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("a docs/ entry").path();
        files.push((format!("docs/{}", path.file_name().unwrap_or_default().to_string_lossy()), read(&path)));
    }
    files.push(("README.md".to_string(), read(&root.join("README.md"))));
    let mut found = Vec::new();
    for (path, text) in files {
        for (number, line) in text.lines().enumerate() {
            let mut rest = line.to_string();
            for name in SERDE_SEED_NAMES {
                rest = rest.replace(name, "");
            }
            if rest.to_lowercase().contains("seed") {
                found.push(format!("{path}:{}: {}", number + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "say what is meant (a fixed table, the record format, a fill), not \"seed\":\n{}",
        found.join("\n")
    );
}

#[test]
fn ci_runs_the_layering_check() {
    let ci = read(&root().join(".ci/run"));
    assert!(ci.contains("--test main layering::"), ".ci/run runs tests/layering.rs by name");
}

/// `text` without its comment lines (doc comments name modules freely).
fn code_of(text: &str) -> String {
    text.lines().filter(|line| !line.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

fn read(file: &Path) -> String {
    fs::read_to_string(file).unwrap_or_else(|error| panic!("{}: {error}", file.display()))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn is_test_file(relative: &str) -> bool {
    let name = relative.rsplit('/').next().unwrap_or(relative);
    name == "tests.rs" || name.starts_with("tests_") || name.ends_with("_tests.rs") || relative.contains("/tests/")
}
