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
