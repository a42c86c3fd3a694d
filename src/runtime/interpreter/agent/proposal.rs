//! A model answer read as one member of the union the prompt asks for —
//! `action {tool, arguments}`, `ask {question}`, `finish {summary}` — and
//! an action's arguments turned into the [`ResolvedAction`] the runtime
//! would run. Anything else is refused with a reason (the model sees it as
//! an observation); nothing here runs anything.

use serde_json::{Map, Value};

use crate::model::{AgentTool, ArgMatcher, Policy, is_safe_method};
use crate::tools::ResolvedAction;

/// The longest question or summary accepted, in bytes.
pub(crate) const MAX_TEXT_BYTES: usize = 2000;

/// What the model proposed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Proposal {
    Act { tool: String, arguments: Map<String, Value> },
    Ask(String),
    Finish(String),
}

/// Reads a decoded answer; `Err` says why it is not a union member.
pub(crate) fn decode(answer: &Value) -> Result<Proposal, String> {
    let Some(object) = answer.as_object() else {
        return Err("the answer is not a JSON object".to_string());
    };
    let kind = object.get("type").and_then(Value::as_str).ok_or("the answer has no string `type`")?;
    let text = |key: &str| -> Result<String, String> {
        let text = object.get(key).and_then(Value::as_str).ok_or(format!("`{kind}` needs a string `{key}`"))?;
        if text.trim().is_empty() || text.len() > MAX_TEXT_BYTES {
            return Err(format!("`{key}` must be 1 to {MAX_TEXT_BYTES} bytes"));
        }
        Ok(text.to_string())
    };
    let only = |keys: &[&str]| -> Result<(), String> {
        match object.keys().find(|key| !keys.contains(&key.as_str())) {
            Some(extra) => Err(format!("`{kind}` has an unexpected field `{extra}`")),
            None => Ok(()),
        }
    };
    match kind {
        "action" => {
            only(&["type", "tool", "arguments"])?;
            let tool = object.get("tool").and_then(Value::as_str).ok_or("`action` needs a string `tool`")?;
            let arguments =
                object.get("arguments").and_then(Value::as_object).ok_or("`action` needs an object `arguments`")?;
            Ok(Proposal::Act { tool: tool.to_string(), arguments: arguments.clone() })
        }
        "ask" => {
            only(&["type", "question"])?;
            Ok(Proposal::Ask(text("question")?))
        }
        "finish" => {
            only(&["type", "summary"])?;
            Ok(Proposal::Finish(text("summary")?))
        }
        other => Err(format!("unknown answer type `{other}` (expected `action`, `ask` or `finish`)")),
    }
}

/// The action `tool` with `arguments` stands for, or why the arguments do
/// not fit the tool's schema. A shell rule's arguments must fit one of
/// its argument lists here already (the policy decides again when it runs).
pub(crate) fn resolve(
    policy: &Policy,
    tool: AgentTool<'_>,
    arguments: &Map<String, Value>,
) -> Result<ResolvedAction, String> {
    let string = |key: &str| -> Result<String, String> {
        arguments.get(key).and_then(Value::as_str).map(str::to_string).ok_or(format!("needs a string `{key}`"))
    };
    let only = |keys: &[&str]| -> Result<(), String> {
        match arguments.keys().find(|key| !keys.contains(&key.as_str())) {
            Some(extra) => Err(format!("unexpected argument `{extra}`")),
            None => Ok(()),
        }
    };
    match tool {
        AgentTool::ReadFile => {
            only(&["path"])?;
            Ok(ResolvedAction::ReadFile { path: string("path")? })
        }
        AgentTool::WriteFile => {
            only(&["path", "content"])?;
            Ok(ResolvedAction::WriteFile { path: string("path")?, content: string("content")? })
        }
        AgentTool::TicketLookup => {
            only(&["ticket_id"])?;
            Ok(ResolvedAction::TicketLookup { ticket_id: string("ticket_id")? })
        }
        AgentTool::TicketClose => {
            only(&["ticket_id"])?;
            Ok(ResolvedAction::TicketClose { ticket_id: string("ticket_id")? })
        }
        AgentTool::Http(index, _) => {
            only(&["method", "url", "body"])?;
            let rule = &policy.http.allow[index];
            let method = string("method")?;
            if !rule.methods.contains(&method) {
                return Err(format!(
                    "method `{method}` is not one of rule `{}`'s ({})",
                    rule.name,
                    rule.methods.join(", ")
                ));
            }
            let body = match arguments.get("body") {
                None => None,
                Some(body) => Some(body.as_str().ok_or("`body` is not a string")?.to_string()),
            };
            Ok(ResolvedAction::Http {
                method,
                url: string("url")?,
                headers: Default::default(),
                secrets: Vec::new(),
                body,
                json_body: false,
                expect_status: Vec::new(),
                max_response_bytes: None,
                response_headers: Vec::new(),
            })
        }
        AgentTool::Mcp(server, tool) => Ok(ResolvedAction::Mcp {
            server: server.to_string(),
            tool: tool.to_string(),
            arguments: Value::Object(arguments.clone()),
        }),
        AgentTool::Shell(index, _) => {
            only(&["args"])?;
            let rule = &policy.shell.allow[index];
            let args = arguments
                .get("args")
                .and_then(Value::as_array)
                .ok_or("needs an array `args`")?
                .iter()
                .map(|arg| arg.as_str().map(str::to_string).ok_or("`args` holds a value that is not a string"))
                .collect::<Result<Vec<String>, _>>()?;
            let fits = rule.args.iter().any(|pattern| {
                let shape = if rule.prefix { args.len() >= pattern.0.len() } else { args.len() == pattern.0.len() };
                shape
                    && pattern.0.iter().zip(&args).all(|(matcher, arg)| match matcher {
                        ArgMatcher::Literal(literal) => literal == arg,
                        ArgMatcher::Regex(regex) => regex.is_match(arg),
                        ArgMatcher::Slot { allow_dash, .. } => *allow_dash || !arg.starts_with('-'),
                    })
            });
            if !fits {
                return Err(format!("`args` fit none of rule `{}`'s argument lists", rule.name));
            }
            let argv = std::iter::once(rule.program.clone()).chain(args).collect();
            Ok(ResolvedAction::Shell { argv, env: Default::default(), secrets: Vec::new(), cwd: None, stdin: None })
        }
    }
}

/// What a model proposed to get `action`, read back from the action: the
/// tool's name where the action tells it (a shell or http rule's id it
/// does not) and the arguments — the inverse of [`resolve`], kept beside
/// it so that a new tool is handled in both. `None` for an action no agent
/// proposes, or one with a field only a planned step sets (an `env`, a
/// `cwd`, headers, secrets, expectations).
pub(crate) fn proposed(action: &ResolvedAction) -> Option<(Option<String>, Map<String, Value>)> {
    let text = |value: &str| Value::String(value.to_string());
    let object = |pairs: Vec<(&str, Value)>| -> Map<String, Value> {
        pairs.into_iter().map(|(key, value)| (key.to_string(), value)).collect()
    };
    let named = |name: &str, arguments| Some((Some(name.to_string()), arguments));
    match action {
        ResolvedAction::Shell { argv, env, secrets, cwd, stdin } => {
            let planned = !env.is_empty() || !secrets.is_empty() || cwd.is_some() || stdin.is_some();
            let args = argv.get(1..).filter(|_| !planned)?.iter().map(|arg| text(arg)).collect();
            Some((None, object(vec![("args", Value::Array(args))])))
        }
        ResolvedAction::ReadFile { path } => named("read_file", object(vec![("path", text(path))])),
        ResolvedAction::WriteFile { path, content } => {
            named("write_file", object(vec![("path", text(path)), ("content", text(content))]))
        }
        ResolvedAction::TicketLookup { ticket_id } => {
            named("ticket_lookup", object(vec![("ticket_id", text(ticket_id))]))
        }
        ResolvedAction::TicketClose { ticket_id } => {
            named("ticket_close", object(vec![("ticket_id", text(ticket_id))]))
        }
        ResolvedAction::Http {
            method,
            url,
            headers,
            secrets,
            body,
            json_body,
            expect_status,
            max_response_bytes,
            response_headers,
        } => {
            let planned = !headers.is_empty()
                || !secrets.is_empty()
                || *json_body
                || !expect_status.is_empty()
                || max_response_bytes.is_some()
                || !response_headers.is_empty();
            if planned {
                return None;
            }
            let mut arguments = object(vec![("method", text(method)), ("url", text(url))]);
            arguments.extend(body.iter().map(|body| ("body".to_string(), text(body))));
            Some((None, arguments))
        }
        ResolvedAction::Mcp { server, tool, arguments } => {
            named(&format!("{server}.{tool}"), arguments.as_object()?.clone())
        }
        ResolvedAction::Finish { .. } | ResolvedAction::Flaky { .. } => None,
    }
}

/// Whether an action writes (and so pauses for a person's approval): the
/// file and ticket writes, an MCP tool call (the policy cannot say a tool
/// only reads), and an HTTP request whose method is not a read.
pub(crate) fn writes(action: &ResolvedAction) -> bool {
    match action {
        ResolvedAction::WriteFile { .. } | ResolvedAction::TicketClose { .. } | ResolvedAction::Mcp { .. } => true,
        ResolvedAction::Http { method, .. } => !is_safe_method(method),
        _ => false,
    }
}

/// The idempotency key of turn `turn`'s write in step `step_id` of run
/// `run_id`: each proposal's effect happens at most once.
pub(crate) fn agent_key(run_id: &str, step_id: &str, turn: u32) -> String {
    format!("{run_id}/{step_id}/turn-{turn}")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::load::Loader;

    const POLICY: &str = r#"version = 1
[shell]
search_path = ["/usr/bin", "/bin"]
[[shell.allow]]
id = "list"
program = "ls"
args = [["-l"], ["-a"]]
[[http.allow]]
id = "api"
methods = ["GET", "POST"]
scheme = "http"
host = "127.0.0.1"
port = 8080
path = "/api"
private = true
[mcp.servers.docs]
command = ["ls", "-l"]
tools = { search = "sha256:0000000000000000000000000000000000000000000000000000000000000000" }
"#;

    fn policy() -> Policy {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, POLICY).expect("write policy");
        let mut loader = Loader::new();
        loader.load_policy(Path::new(&path)).unwrap_or_else(|| panic!("{:?}", loader.diagnostics()))
    }

    /// Every tool an agent may be offered: its proposal resolved, then read
    /// back from the action, is the proposal again.
    #[test]
    fn proposed_reads_back_what_resolve_made_of_every_tool() {
        let policy = policy();
        let cases = [
            ("list", json!({"args": ["-a"]}), None),
            ("read_file", json!({"path": "notes.txt"}), Some("read_file")),
            ("write_file", json!({"path": "out.txt", "content": "hi"}), Some("write_file")),
            ("ticket_lookup", json!({"ticket_id": "ticket-7"}), Some("ticket_lookup")),
            ("ticket_close", json!({"ticket_id": "ticket-7"}), Some("ticket_close")),
            ("api", json!({"method": "GET", "url": "http://127.0.0.1:8080/api/x"}), None),
            ("api", json!({"method": "POST", "url": "http://127.0.0.1:8080/api/x", "body": "{}"}), None),
            ("docs.search", json!({"query": "hello", "limit": 3}), Some("docs.search")),
        ];
        for (tool, arguments, name) in cases {
            let agent_tool = policy.agent_tool(tool).unwrap_or_else(|| panic!("tool {tool}"));
            let arguments = arguments.as_object().expect("object").clone();
            let action = resolve(&policy, agent_tool, &arguments).unwrap_or_else(|error| panic!("{tool}: {error}"));
            assert_eq!(proposed(&action), Some((name.map(str::to_string), arguments)), "{tool}");
        }
    }

    /// An action with a field only a planned step sets is not a proposal.
    #[test]
    fn an_action_with_a_planned_steps_field_was_never_proposed() {
        let shell = ResolvedAction::Shell {
            argv: vec!["ls".into(), "-a".into()],
            env: [("HOME".to_string(), "/".to_string())].into(),
            secrets: Vec::new(),
            cwd: None,
            stdin: None,
        };
        let http = ResolvedAction::Http {
            method: "GET".into(),
            url: "http://127.0.0.1:8080/api".into(),
            headers: [("Authorization".to_string(), "{{ secrets.T }}".to_string())].into(),
            secrets: vec!["T".into()],
            body: None,
            json_body: false,
            expect_status: Vec::new(),
            max_response_bytes: None,
            response_headers: Vec::new(),
        };
        let finish = ResolvedAction::Finish { message: None };
        for action in [shell, http, finish] {
            assert_eq!(proposed(&action), None, "{action:?}");
        }
    }
}
