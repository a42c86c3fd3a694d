//! Loader and validator tests: one case per diagnostic code with its
//! position, TOML/YAML equivalence, defaults and rendering, by topic
//! (`reading.rs`, `plans.rs`, `policies.rs`, `catalog.rs`,
//! `service_policy.rs`, `scenario_git.rs`). This file holds their helpers and the plan written
//! in both formats.

mod catalog;
mod plans;
mod policies;
mod reading;
mod scenario_git;
mod service_policy;

use std::path::{Path, PathBuf};

use crate::diag::{Diagnostic, Severity, render};
use crate::load::{Catalog, Loader};
use crate::model::{Action, Decision, FailureClass, Plan, Policy};

/// A temporary folder holding the files of one test.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        Files { dir: tempfile::tempdir().expect("temp dir") }
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&path, text).expect("write");
        path
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// `code@line:col` of each finding (`code` alone when it has no span).
fn found(loader: &Loader) -> Vec<String> {
    loader.diagnostics().iter().map(|diagnostic| position(loader, diagnostic)).collect()
}

fn position(loader: &Loader, diagnostic: &Diagnostic) -> String {
    match diagnostic.span {
        Some(span) => {
            let file = loader.sources().get(span.source).expect("source");
            let (line, column) = file.line_col(span.start);
            format!("{}@{line}:{column}", diagnostic.code)
        }
        None => diagnostic.code.to_string(),
    }
}

fn plan_text(name: &str, text: &str) -> (Loader, Option<Plan>) {
    let files = Files::new();
    let path = files.write(name, text);
    let mut loader = Loader::new();
    let plan = loader.load_plan(&path);
    (loader, plan)
}

fn policy_text(name: &str, text: &str) -> (Loader, Option<Policy>) {
    let files = Files::new();
    let path = files.write(name, text);
    let mut loader = Loader::new();
    let policy = loader.load_policy(&path);
    (loader, policy)
}

fn plan_errors(text: &str) -> Vec<String> {
    let (loader, plan) = plan_text("p.toml", text);
    assert!(plan.is_none() || !loader.has_errors(), "{:?}", found(&loader));
    found(&loader)
}

fn policy_errors(text: &str) -> Vec<String> {
    let (loader, policy) = policy_text("default.toml", text);
    assert!(policy.is_none() == loader.has_errors(), "{:?}", found(&loader));
    found(&loader)
}

const FLOW_TOML: &str = r#"version = 1
id = "flow_pwd"
description = "pwd → write report.txt → read it back"
keywords = ["test flow pwd to file"]
policy = "default"
default = true

[[steps]]
id = "step-1"
kind = "shell"
command = ["pwd"]
timeout_secs = 10

[[steps]]
id = "step-2"
kind = "write_file"
path = "report-{{ run.id }}.txt"
content = "{{ last.output_text }}"
retry = 2

[[steps]]
id = "step-3"
kind = "read_file"
path = "report.txt"

[[steps]]
id = "step-4"
kind = "flaky"
failures = 2
output = "{{ steps.step-1.output_text }}"

[[steps]]
id = "step-5"
kind = "finish"
message = "done"
"#;

const FLOW_YAML: &str = r#"version: 1
id: flow_pwd
description: "pwd → write report.txt → read it back"
keywords: ["test flow pwd to file"]
policy: default
default: true
steps:
  - id: step-1
    kind: shell
    command: [pwd]
    timeout_secs: 10
  - id: step-2
    kind: write_file
    path: "report-{{ run.id }}.txt"
    content: '{{ last.output_text }}'
    retry: 2
  - id: step-3
    kind: read_file
    path: report.txt
  - id: step-4
    kind: flaky
    failures: 2
    output: "{{ steps.step-1.output_text }}"
  - id: step-5
    kind: finish
    message: done
"#;

/// A minimal valid plan header; tests append steps.
const HEAD: &str = "version = 1\nid = \"p\"\ndefault = true\n";

fn with_steps(steps: &str) -> String {
    format!("{HEAD}{steps}")
}
