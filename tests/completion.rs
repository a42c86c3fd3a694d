//! Conditions and verification decide how a run completes: a false `when`
//! skips its step, `expect` accepts a documented exit code or fails the step
//! on a broken post-condition (never retried), and a failed `verify` check
//! keeps the run from ending `done`.

use crate::common::{Sandbox, TEST_POLICY};

#[test]
fn when_expect_and_verify_decide_the_outcome() {
    let cases = [
        // A false `when` skips the step and the run goes on.
        (
            "[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"echo\", \"no\"]\n\n[[steps]]\nid = \"b\"\nkind = \"write_file\"\npath = \"b.txt\"\ncontent = \"b\"\n[steps.when]\nvalue = \"{{ steps.a.output_text }}\"\ncontains = \"yes\"\n\n[[steps]]\nid = \"c\"\nkind = \"write_file\"\npath = \"c.txt\"\ncontent = \"c\"\n",
            0,
            "end_of_plan",
        ),
        // `expect.exit_code` accepts a documented non-zero exit.
        (
            "[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"false\"]\n[steps.expect]\nexit_code = 1\n",
            0,
            "end_of_plan",
        ),
        // A failed post-condition is `verification_failed`, never retried.
        (
            "[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"echo\", \"hello\"]\n[steps.expect]\noutput_matches = \"^bye\"\n",
            1,
            "step_failed",
        ),
        // A failed verifier cannot produce `done`.
        (
            "[[steps]]\nid = \"a\"\nkind = \"write_file\"\npath = \"a.txt\"\ncontent = \"hello\"\n\n[[verify]]\nkind = \"file\"\npath = \"a.txt\"\ncontains = \"goodbye\"\n",
            1,
            "verification_failed",
        ),
        (
            "[[steps]]\nid = \"a\"\nkind = \"write_file\"\npath = \"a.txt\"\ncontent = \"hello\"\n\n[[verify]]\nkind = \"file\"\npath = \"a.txt\"\ncontains = \"hello\"\n",
            0,
            "end_of_plan",
        ),
    ];
    for (steps, code, reason) in cases {
        let sandbox = Sandbox::new();
        let output = sandbox.run_plan(&format!("version = 1\nid = \"test\"\n\n{steps}"), TEST_POLICY);
        assert_eq!(output.code, code, "{steps}\n{}", output.snapshot());
        assert_eq!(sandbox.state("t")["stop_reason"], reason, "{steps}");
        if reason == "step_failed" {
            let history = sandbox.history("t");
            assert_eq!(history.len(), 1);
            assert_eq!(history[0]["failure_class"], "verification_failed");
        }
    }
    let skipped = Sandbox::new();
    let output = skipped.run_plan(&format!("version = 1\nid = \"test\"\n\n{}", cases[0].0), TEST_POLICY);
    assert_eq!(output.code, 0);
    assert!(!skipped.workspace().join("b.txt").exists(), "the skipped step wrote");
    assert!(skipped.workspace().join("c.txt").exists());
    assert_eq!(skipped.history("t")[1]["status"], "skipped");
}
