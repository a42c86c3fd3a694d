//! The scripted model (`planrun::ops::ScriptedModel`) as the agent tests
//! use it: a policy's `[models.fake]` pointing at it, and answers built
//! from JSON.

use serde_json::{Value, json};

pub use planrun::ops::ScriptedModel as FakeModel;

/// A `[models.fake]` table pointing at `model`.
pub fn profile(model: &FakeModel) -> String {
    format!(
        "[models.fake]\nbackend = \"openai\"\nendpoint = \"{}\"\nmodel = \"fake\"\ntimeout_secs = 10\n",
        model.endpoint()
    )
}

/// Starts a scripted model serving `answers`.
pub fn start(answers: Vec<String>) -> FakeModel {
    FakeModel::start(answers).expect("a loopback port")
}

/// An `action` answer.
pub fn action(tool: &str, arguments: Value) -> String {
    json!({"type": "action", "tool": tool, "arguments": arguments}).to_string()
}

/// A `finish` answer.
pub fn finish(summary: &str) -> String {
    json!({"type": "finish", "summary": summary}).to_string()
}

/// An `ask` answer.
pub fn ask(question: &str) -> String {
    json!({"type": "ask", "question": question}).to_string()
}

/// The observations agent run `t` recorded (`agent_observation` events),
/// as `(outcome, rule, text)`.
pub fn observations(sandbox: &super::Sandbox) -> Vec<(String, String, String)> {
    sandbox
        .record(super::tickets::RUN, "audit.jsonl")
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("audit line"))
        .filter(|event| event["event_type"] == "agent_observation")
        .map(|event| {
            let text = |key: &str| event["details"][key].as_str().unwrap_or("").to_string();
            (text("outcome"), text("rule"), text("text"))
        })
        .collect()
}
