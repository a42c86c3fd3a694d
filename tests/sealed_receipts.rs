//! Receipts that cannot be forged: the runtime's receipts are sealed like
//! checkpoints, a receipt of the earlier unsealed format is still read
//! without a key and refused under one, and the run's log names the
//! receipt it used, so a receipt swapped afterwards fails `verify`.

use std::fs;
use std::path::PathBuf;

use serde_json::Value;

use crate::common::{Output, Sandbox, TEST_POLICY};

const PLAN: &str = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"write\"\nkind = \"write_file\"\npath = \"out.txt\"\ncontent = \"v1\"\nidempotency_key = \"report-1\"\n";

fn run(sandbox: &Sandbox, run_id: &str, key: Option<&str>) -> Output {
    let command = sandbox.planrun().in_sandbox().args([
        "--plan",
        "plans/test.toml",
        "--policies",
        "policies",
        "--run-id",
        run_id,
    ]);
    match key {
        Some(key) => command.env("PLANRUN_HMAC_KEY", key).run(),
        None => command.run(),
    }
}

/// The one receipt of the workspace.
fn receipt_file(sandbox: &Sandbox) -> PathBuf {
    let mut files: Vec<PathBuf> = fs::read_dir(sandbox.workspace().join(".planrun/receipts"))
        .expect("receipts")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.remove(0)
}

/// Every record file of a run, whatever the layout, as one text.
fn run_records(sandbox: &Sandbox, run_id: &str) -> String {
    let dir = sandbox.workspace().join("runs").join(run_id);
    fs::read_dir(dir).expect("run folder").flatten().filter_map(|entry| fs::read_to_string(entry.path()).ok()).collect()
}

/// `show --json` of a run.
fn shown(sandbox: &Sandbox, run_id: &str, key: Option<&str>) -> String {
    let command = sandbox.planrun().args(["show", run_id, "--json"]);
    let output = match key {
        Some(key) => command.env("PLANRUN_HMAC_KEY", key).run(),
        None => command.run(),
    };
    assert_eq!(output.code, 0, "{}", output.snapshot());
    output.stdout
}

#[test]
fn receipts_are_sealed_and_the_log_names_the_one_it_used() {
    for key in [None, Some("s3cret")] {
        let sandbox = Sandbox::new();
        sandbox.write_plan(PLAN, TEST_POLICY);
        assert_eq!(run(&sandbox, "t", key).code, 0);
        let envelope: Value =
            serde_json::from_str(&fs::read_to_string(receipt_file(&sandbox)).expect("receipt")).expect("JSON");
        let digest = if key.is_some() { &envelope["hmac_sha256"] } else { &envelope["sha256"] };
        assert!(digest.is_string(), "sealed: {envelope}");
        assert_eq!(envelope["payload"]["state"], "done");
        let records = run_records(&sandbox, "t");
        assert!(records.contains(&format!("\"receipt_link\":{digest}")), "the log names the receipt: {records}");
    }
}

#[test]
fn an_unsealed_receipt_of_the_earlier_format_is_read_without_a_key_and_refused_under_one() {
    for key in [None, Some("s3cret")] {
        let sandbox = Sandbox::new();
        sandbox.write_plan(PLAN, TEST_POLICY);
        assert_eq!(run(&sandbox, "t", key).code, 0);
        // The receipt as the earlier format wrote it: the receipt alone.
        let path = receipt_file(&sandbox);
        let envelope: Value = serde_json::from_str(&fs::read_to_string(&path).expect("receipt")).expect("JSON");
        fs::write(&path, serde_json::to_string_pretty(&envelope["payload"]).expect("JSON")).expect("write");
        let out = sandbox.workspace().join("out.txt");
        fs::remove_file(&out).expect("remove the target");
        let again = run(&sandbox, "t2", key);
        assert_eq!(again.code, 0, "{}", again.snapshot());
        let history = shown(&sandbox, "t2", key);
        if key.is_none() {
            // Read and reused: the write does not run again.
            assert!(!out.exists(), "the receipt stood for the write");
            assert!(history.contains("reused_receipt"), "{history}");
        } else {
            // Refused: not evidence. The target answers (missing: not
            // applied), so the write runs, once, with a sealed receipt.
            assert_eq!(fs::read_to_string(&out).expect("written"), "v1");
            assert!(!history.contains("reused_receipt"), "{history}");
            let resealed: Value = serde_json::from_str(&fs::read_to_string(&path).expect("receipt")).expect("JSON");
            assert!(resealed["hmac_sha256"].is_string(), "{resealed}");
        }
    }
}

#[test]
fn a_receipt_swapped_after_the_run_fails_verification() {
    for key in [None, Some("s3cret")] {
        let sandbox = Sandbox::new();
        sandbox.write_plan(PLAN, TEST_POLICY);
        assert_eq!(run(&sandbox, "t", key).code, 0);
        // Another genuine receipt for the same key, sealed by planrun: run
        // `t2` in a second workspace writes one, which replaces `t`'s.
        let other = Sandbox::new();
        other.write_plan(&PLAN.replace("v1", "v2"), TEST_POLICY);
        assert_eq!(run(&other, "t2", key).code, 0);
        fs::copy(receipt_file(&other), receipt_file(&sandbox)).expect("swap");
        let verify = {
            let command = sandbox.planrun().args(["verify", "t"]);
            match key {
                Some(key) => command.env("PLANRUN_HMAC_KEY", key).run(),
                None => command.run(),
            }
        };
        assert_eq!(verify.code, 2, "{}", verify.snapshot());
        assert!(verify.stderr.contains("was changed or replaced since"), "{}", verify.stderr);
    }
}
