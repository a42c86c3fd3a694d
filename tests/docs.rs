//! The reference in `docs/` (and the README landing page) names everything a
//! user can type or set: every CLI subcommand (nested ones such as
//! `policy check` included, taken from the clap definition), every plan,
//! policy and service policy key (from the loader's JSON Schemas), every
//! exit code and every `PLANRUN_*` environment variable read in `src/`.
//! A command or key added without documentation fails here, listed by name.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use clap::CommandFactory;
use planrun::load::{SchemaKind, schema};
use regex::Regex;
use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The text of every page of `docs/` and of the README.
fn documentation() -> String {
    let docs = Path::new(ROOT).join("docs");
    let mut pages: Vec<_> = fs::read_dir(&docs)
        .unwrap_or_else(|error| panic!("{}: {error}", docs.display()))
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.sort();
    assert!(pages.len() >= 7, "docs/ lost its pages: {pages:?}");
    pages.push(Path::new(ROOT).join("README.md"));
    pages.iter().map(|page| fs::read_to_string(page).expect("a readable page")).collect::<Vec<_>>().join("\n")
}

/// Only the code of a page: fenced blocks and inline `code` spans, where
/// keys are written as the user types them.
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_fence = !in_fence;
        } else if in_fence {
            code.push_str(line);
            code.push('\n');
        }
    }
    for span in Regex::new(r"`[^`\n]+`").expect("a valid regex").find_iter(text) {
        code.push_str(span.as_str());
        code.push('\n');
    }
    code
}

/// `planrun <sub> [<sub>…]` for every subcommand at every depth (clap's own
/// `help` excepted).
fn command_lines() -> Vec<String> {
    fn walk(command: &clap::Command, prefix: &str, out: &mut Vec<String>) {
        for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set() && sub.get_name() != "help") {
            let line = format!("{prefix} {}", sub.get_name());
            walk(sub, &line, out);
            out.push(line);
        }
    }
    let mut lines = Vec::new();
    walk(&planrun::cli::Cli::command(), "planrun", &mut lines);
    lines
}

/// Every property name of a JSON Schema, at every depth (step variants under
/// `allOf`/`then`, list items, maps).
fn schema_keys(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(object) => {
            if let Some(Value::Object(properties)) = object.get("properties") {
                out.extend(properties.keys().cloned());
            }
            object.values().for_each(|child| schema_keys(child, out));
        }
        Value::Array(items) => items.iter().for_each(|child| schema_keys(child, out)),
        _ => {}
    }
}

/// Every `PLANRUN_*` variable named in the sources.
fn environment_variables(dir: &Path, pattern: &Regex, out: &mut BTreeSet<String>) {
    for entry in fs::read_dir(dir).expect("a readable src/ folder") {
        let path = entry.expect("a src/ entry").path();
        if path.is_dir() {
            environment_variables(&path, pattern, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let text = fs::read_to_string(&path).expect("a readable source file");
            out.extend(pattern.find_iter(&text).map(|found| found.as_str().to_string()));
        }
    }
}

/// What `text` fails to name, one line per item.
fn missing_from(text: &str) -> Vec<String> {
    let code = code_of(text);
    let mut missing = Vec::new();

    let commands = command_lines();
    assert!(commands.len() >= 15 && commands.iter().any(|line| line == "planrun policy check"), "{commands:?}");
    missing.extend(commands.into_iter().filter(|line| !text.contains(line.as_str())).map(|c| format!("command `{c}`")));

    for kind in SchemaKind::ALL {
        let mut keys = BTreeSet::new();
        schema_keys(&schema(kind), &mut keys);
        assert!(keys.len() >= 15, "the {} schema lost its keys: {keys:?}", kind.name());
        for key in keys {
            let word = Regex::new(&format!(r"\b{}\b", regex::escape(&key))).expect("a valid regex");
            if !word.is_match(&code) {
                missing.push(format!("{} key `{key}`", kind.name()));
            }
        }
    }

    for exit_code in 0..=3 {
        if !text.contains(&format!("\n| {exit_code} |")) {
            missing.push(format!("exit code {exit_code} (a `| {exit_code} |` row)"));
        }
    }

    let mut variables = BTreeSet::new();
    let pattern = Regex::new(r"\bPLANRUN_[A-Z][A-Z_]*[A-Z]\b").expect("a valid regex");
    environment_variables(&Path::new(ROOT).join("src"), &pattern, &mut variables);
    assert!(variables.contains("PLANRUN_TEST_CLOCK"), "{variables:?}");
    missing.extend(variables.into_iter().filter(|var| !text.contains(var.as_str())).map(|v| format!("variable `{v}`")));
    missing
}

#[test]
fn the_docs_name_every_command_key_exit_code_and_variable() {
    let missing = missing_from(&documentation());
    assert!(missing.is_empty(), "not documented in docs/ or README.md:\n  {}", missing.join("\n  "));
}

#[test]
fn a_missing_command_key_or_variable_is_listed_by_name() {
    let docs = documentation()
        .replace("planrun policy check", "planrun policy")
        .replace("max_tool_calls", "max_calls")
        .replace("PLANRUN_HMAC_KEY", "HMAC_KEY")
        .replace("\n| 3 |", "\n| three |");
    let missing = missing_from(&docs);
    for expected in [
        "command `planrun policy check`",
        "plan key `max_tool_calls`",
        "policy key `max_tool_calls`",
        "exit code 3 (a `| 3 |` row)",
        "variable `PLANRUN_HMAC_KEY`",
    ] {
        assert!(missing.iter().any(|line| line == expected), "`{expected}` not reported in {missing:#?}");
    }
}
