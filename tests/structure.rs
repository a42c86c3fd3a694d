//! The shape of `src/` a newcomer relies on, checked on every test run:
//! rooms stay small, facts travel as types, the use cases sit below the
//! front ends, one place picks a store, run ids are parsed once, and the
//! layering check runs in CI. `layering.rs` checks the imports; this
//! module checks the rest of what `src/lib.rs` promises.

use std::fs;
use std::path::{Path, PathBuf};

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
    let root = root();
    let mut long = Vec::new();
    for file in rust_files(&root.join("src")) {
        let relative = relative(&root, &file);
        if is_test_file(&relative) || LONG_FILES_ALLOWED.contains(&relative.as_str()) {
            continue;
        }
        let lines = read(&file).lines().count();
        if lines > MAX_LINES {
            long.push(format!("{relative}: {lines} lines"));
        }
    }
    assert!(long.is_empty(), "files over {MAX_LINES} lines (split them by concern):\n{}", long.join("\n"));
}

#[test]
fn the_runtime_and_front_ends_read_facts_as_types() {
    let root = root();
    let mut found = Vec::new();
    for folder in TYPED_FACT_FOLDERS {
        for file in rust_files(&root.join(folder)) {
            let text = read(&file);
            for (number, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for pattern in FACT_BY_KEY {
                    if code.contains(pattern) {
                        found.push(format!("{}:{}: {}", relative(&root, &file), number + 1, line.trim()));
                    }
                }
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
    let mut axum_in_service = Vec::new();
    for file in rust_files(&root.join("src/ops/service")) {
        let text = code_of(&read(&file));
        if text.contains("axum") || text.contains("crate::server") {
            axum_in_service.push(relative(&root, &file));
        }
    }
    assert!(axum_in_service.is_empty(), "the service layer knows no HTTP framework: {axum_in_service:?}");
}

#[test]
fn one_place_opens_a_store_and_run_ids_are_a_type() {
    let root = root();
    let mut openers = Vec::new();
    for file in rust_files(&root.join("src")) {
        let relative = relative(&root, &file);
        if relative.starts_with("src/store/") || is_test_file(&relative) {
            continue;
        }
        let text = code_of(&read(&file));
        if ["PgStores", "PgBackend", "PgLocation", "StoreLocation"].iter().any(|name| text.contains(name)) {
            openers.push(relative);
        }
    }
    assert!(openers.is_empty(), "only `store::open` chooses a backend; also chosen in: {openers:?}");
    let all: String = rust_files(&root.join("src")).iter().map(|file| read(file)).collect();
    assert!(all.contains("pub struct RunId"), "a run id is parsed once, into `RunId`");
}

/// serde's names for a stateful deserializer, the one use of the word a
/// reader is taught elsewhere.
const SERDE_SEED_NAMES: &[&str] = &["DeserializeSeed", "next_element_seed", "next_value_seed", "next_key_seed"];

#[test]
fn the_code_and_docs_say_what_they_mean() {
    let root = root();
    let mut files = rust_files(&root.join("src"));
    files.extend(fs::read_dir(root.join("docs")).expect("docs/").map(|entry| entry.expect("a docs/ entry").path()));
    files.push(root.join("README.md"));
    let mut found = Vec::new();
    for file in files {
        let Ok(text) = fs::read_to_string(&file) else { continue };
        for (number, line) in text.lines().enumerate() {
            let mut rest = line.to_string();
            for name in SERDE_SEED_NAMES {
                rest = rest.replace(name, "");
            }
            if rest.to_lowercase().contains("seed") {
                found.push(format!("{}:{}: {}", relative(&root, &file), number + 1, line.trim()));
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

fn relative(root: &Path, file: &Path) -> String {
    file.strip_prefix(root).expect("under the root").to_string_lossy().replace('\\', "/")
}

fn is_test_file(relative: &str) -> bool {
    let name = relative.rsplit('/').next().unwrap_or(relative);
    name == "tests.rs" || name.starts_with("tests_") || name.ends_with("_tests.rs") || relative.contains("/tests/")
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return files;
    };
    for entry in entries {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}
