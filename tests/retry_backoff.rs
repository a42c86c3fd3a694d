//! `retry_backoff`: the wait before each retry, exponential and capped with
//! jitter, from the policy's `[retry_backoff]` and a step's own table. Under
//! the test clock nothing sleeps and the clock moves on by each wait (the
//! timestamps show it); with the real clock the run really waits. Each wait
//! is recorded (`backoff_ms`) and shown in progress; `extends` merges the
//! section; bad values are loader errors with `file:line:column`.

use serde_json::Value;

use crate::common::{Sandbox, TEST_POLICY};

/// `flaky` fails its first `failures` attempts; the policy allows 4.
fn plan(failures: u32, backoff: &str) -> String {
    format!(
        "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"build\"\nkind = \"flaky\"\nfailures = {failures}\noutput = \"ok\"\nretry = 4\n{backoff}\n"
    )
}

fn policy(backoff: &str) -> String {
    let policy = TEST_POLICY.replace("[retry]\n", "[retry]\ncap = 4\n");
    format!("{}\n{backoff}\n", policy.replace("[budget]\n", "[budget]\nmax_consecutive_failures = 5\n"))
}

/// The `retry_scheduled` events of run `t`.
fn scheduled(sandbox: &Sandbox) -> Vec<Value> {
    sandbox
        .record("t", "audit.jsonl")
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["event_type"] == "retry_scheduled")
        .collect()
}

fn waits(sandbox: &Sandbox) -> Vec<u64> {
    scheduled(sandbox).iter().map(|event| event["details"]["backoff_ms"].as_u64().expect("backoff_ms")).collect()
}

/// Milliseconds between two RFC 3339 timestamps of the records.
fn millis(timestamp: &str) -> i64 {
    let parsed: jiff::Timestamp = timestamp.parse().expect("an RFC 3339 timestamp");
    parsed.as_millisecond()
}

#[test]
fn waits_grow_by_the_multiplier_up_to_the_cap_and_move_the_test_clock() {
    let sandbox = Sandbox::new();
    sandbox.write_plan(
        &plan(3, "retry_backoff = { initial_ms = 1500, multiplier = 3, jitter = \"none\" }"),
        &policy("[retry_backoff]\nmax_ms = 4000"),
    );
    let output = sandbox.test_plan().clock("2026-01-01T00:00:00Z").run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    // 1500, then 4500 capped at the policy's 4000, then 4000.
    assert_eq!(waits(&sandbox), [1500, 4000, 4000]);
    assert!(output.stderr.contains("build waits 1500 ms before attempt 2 of 4 (retry_backoff)"), "{}", output.stderr);
    assert!(output.stderr.contains("build waits 4000 ms before attempt 4 of 4"), "{}", output.stderr);
    // The test clock ticks one second per reading and moves on by each wait:
    // an attempt starts more than the wait after the one before ended.
    let history = sandbox.history("t");
    assert_eq!(history.len(), 4);
    for (pair, wait) in history.windows(2).zip([1500, 4000, 4000]) {
        let gap = millis(pair[1]["started_at"].as_str().expect("started_at"))
            - millis(pair[0]["finished_at"].as_str().expect("finished_at"));
        assert!(gap >= wait && gap < wait + 10_000, "gap {gap} ms for a wait of {wait} ms");
    }
    assert_eq!(sandbox.planrun().args(["verify", "t"]).run().code, 0);
}

#[test]
fn the_default_jitter_stays_in_the_upper_half_and_is_the_same_for_the_same_run() {
    let first = Sandbox::new();
    first.write_plan(&plan(2, ""), &policy("[retry_backoff]\ninitial_ms = 1000\nmax_ms = 100000"));
    assert_eq!(first.test_plan().clock("2026-01-01T00:00:00Z").run().code, 0);
    let waits_first = waits(&first);
    assert_eq!(waits_first.len(), 2);
    assert!((500..=1000).contains(&waits_first[0]), "{waits_first:?}");
    assert!((1000..=2000).contains(&waits_first[1]), "{waits_first:?}");
    let second = Sandbox::new();
    second.write_plan(&plan(2, ""), &policy("[retry_backoff]\ninitial_ms = 1000\nmax_ms = 100000"));
    assert_eq!(second.test_plan().clock("2026-01-01T00:00:00Z").run().code, 0);
    assert_eq!(waits(&second), waits_first, "the same run id and step: the same waits");
}

#[test]
fn the_real_clock_really_waits() {
    let sandbox = Sandbox::new();
    sandbox.write_plan(&plan(1, "retry_backoff = { initial_ms = 400, jitter = \"none\" }"), &policy(""));
    let started = std::time::Instant::now();
    let output = sandbox.test_plan().real_clock().run();
    let elapsed = started.elapsed();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(waits(&sandbox), [400]);
    assert!(elapsed >= std::time::Duration::from_millis(400), "the run did not wait: {elapsed:?}");
    // `initial_ms = 0`: a retry at once, recorded as a wait of 0.
    let sandbox = Sandbox::new();
    sandbox.write_plan(&plan(1, "retry_backoff = { initial_ms = 0 }"), &policy(""));
    assert_eq!(sandbox.test_plan().real_clock().run().code, 0);
    assert_eq!(waits(&sandbox), [0]);
}

#[test]
fn a_child_policy_replaces_the_keys_it_gives() {
    let sandbox = Sandbox::new();
    sandbox.write("policies/parent.toml", &policy("[retry_backoff]\ninitial_ms = 700\njitter = \"none\""));
    sandbox.write("policies/default.toml", "version = 1\nextends = \"parent\"\n[retry_backoff]\nmultiplier = 5\n");
    sandbox.write("plans/test.toml", &plan(2, ""));
    let output = sandbox.test_plan().clock("2026-01-01T00:00:00Z").run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(waits(&sandbox), [700, 3500]);
}

#[test]
fn bad_values_are_refused_at_load_with_their_position() {
    let sandbox = Sandbox::new();
    let output = sandbox.run_plan(&plan(1, "retry_backoff = { jitter = \"random\", multiplier = 0 }"), TEST_POLICY);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stderr.contains("unknown `jitter` `random`"), "{}", output.stderr);
    assert!(output.stderr.contains("plans/test.toml:10:"), "{}", output.stderr);
    assert!(output.stderr.contains("`multiplier`"), "{}", output.stderr);
    assert!(!sandbox.workspace().join("runs").exists(), "a run started");

    let output = sandbox.run_plan(&plan(1, ""), &policy("[retry_backoff]\ninitial = 5"));
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stderr.contains("unknown key `initial`"), "{}", output.stderr);
    assert!(
        output.stderr.contains("allowed keys: `initial_ms`, `max_ms`, `multiplier`, `jitter`"),
        "{}",
        output.stderr
    );
}
