//! `planrun check` on broken files: each fixture in `tests/fixtures/broken/`
//! (a file, or a folder for findings across plans) has a golden snapshot of
//! the exact output in `snapshots/diagnostics/`.

use std::fs;
use std::path::Path;

use planrun::load::Loader;

use crate::common::{ROOT, Sandbox, snapshot_settings};

#[test]
fn every_broken_fixture_has_its_exact_check_output() {
    let sandbox = Sandbox::new();
    let dir = Path::new(ROOT).join("tests/fixtures/broken");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .expect("fixtures")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 10, "fixtures missing: {names:?}");
    let settings = snapshot_settings("diagnostics");
    for name in names {
        let relative = format!("tests/fixtures/broken/{name}");
        let output = sandbox.planrun().args(["check", &relative]).run();
        assert_ne!(output.code, 0, "{name} must not pass `check`: {}", output.snapshot());
        assert!(
            output.stdout.contains(&format!("--> {relative}:"))
                || output.stdout.contains(&format!("--> {relative}/"))
                || output.stdout.contains("error[io-error]"),
            "{name}: no position\n{}",
            output.stdout
        );
        settings.bind(|| insta::assert_snapshot!(name.clone(), output.snapshot()));
    }
}

#[test]
fn all_findings_of_a_file_come_out_in_one_pass() {
    let output = Sandbox::new().planrun().args(["check", "tests/fixtures/broken/many_errors.toml"]).run();
    let codes: Vec<&str> = output.stdout.lines().filter(|line| line.starts_with("error[")).collect();
    assert!(codes.len() >= 3, "{}", output.stdout);
}

#[test]
fn check_json_reports_code_severity_and_position() {
    let output =
        Sandbox::new().planrun().args(["check", "tests/fixtures/broken/unknown_key.toml", "--format", "json"]).run();
    assert_eq!(output.code, 2);
    let value: serde_json::Value = serde_json::from_str(&output.stdout).expect("JSON");
    let first = &value["diagnostics"][0];
    assert_eq!(first["severity"], "error");
    assert_eq!(first["code"], "unknown-key");
    assert_eq!(first["location"]["file"], "tests/fixtures/broken/unknown_key.toml");
    assert_eq!(first["location"]["line"], 3);
    assert_eq!(first["location"]["column"], 1);
}

#[test]
fn a_yaml_plan_and_its_toml_twin_load_to_the_same_model() {
    let mut loader = Loader::new();
    let root = Path::new(ROOT);
    let yaml = loader.load_plan(&root.join("plans/inspect_ru.yaml")).expect("YAML plan loads");
    let toml = loader.load_plan(&root.join("tests/fixtures/twin/inspect_ru.toml")).expect("TOML twin loads");
    assert!(!loader.has_errors());
    assert_eq!(serde_json::to_value(&yaml).expect("json"), serde_json::to_value(&toml).expect("json"));
}

#[test]
fn the_repository_plans_are_clean_apart_from_documented_negative_scenarios() {
    let mut loader = Loader::new();
    let root = Path::new(ROOT);
    loader.load_catalog(&root.join("plans"), &root.join("policies"));
    let serious: Vec<_> = loader
        .diagnostics()
        .iter()
        .filter(|diagnostic| diagnostic.severity > planrun::diag::Severity::Note)
        .map(|diagnostic| planrun::diag::render(loader.sources(), diagnostic))
        .collect();
    assert!(serious.is_empty(), "{}", serious.join("\n"));
}
