//! `planrun plan`: what a run would do, computed without doing any of it.
//!
//! A [`Preview`] is built from the validated plan and policy alone. It reads
//! no workspace, resolves no program and creates nothing: shell decisions
//! come from [`evaluate_argv`] with the lexical [`PathRules`] (never stricter
//! than the runtime, so a `forbidden` here is certain), file paths from the
//! same lexical rules. Anything that depends on a step's output is shown as
//! a runtime reference, `⟨last.output_text⟩`, and its decision as
//! `runtime`.
//!
//! Adding a step kind: add its payload fields in `payload` and, when the
//! policy judges it, its verdict in `verdict`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::confine::PathRules;
use crate::model::{Action, Budget, FailureClass, Plan, Policy, Step, VerifyCheck, WhenFalse};
use crate::policy::{display_argv, evaluate_argv};
use crate::router::RouteDecision;
use crate::template::{Segment, Template};

/// Everything `planrun plan` shows, serializable for `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Preview {
    pub plan: PlanSummary,
    /// How the goal was routed, when the plan was chosen by `--goal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<RoutePreview>,
    pub policy: PolicySummary,
    pub steps: Vec<StepPreview>,
    /// `planrun check` findings about the plan's file (warnings and notes;
    /// with errors there is no preview), as in `check --format json`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanSummary {
    pub id: String,
    pub path: String,
    pub description: String,
    pub keywords: Vec<String>,
    /// `done`, or `failed` for a plan documenting a negative scenario.
    pub expected_status: String,
    /// The plan's `[[verify]]` completion checks, one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verify: Vec<String>,
    /// The plan's declared inputs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<crate::model::InputSpec>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RoutePreview {
    #[serde(flatten)]
    pub decision: RouteDecision,
    pub why: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct PolicySummary {
    pub name: String,
    pub path: String,
    pub budget: Budget,
    pub retry_cap: u32,
}

/// One step as it would run.
#[derive(Debug, Clone, Serialize)]
pub struct StepPreview {
    /// 1-based position in the plan.
    pub number: usize,
    pub id: String,
    pub kind: &'static str,
    /// Payload fields in plan order; templates shown statically.
    pub payload: Vec<PayloadField>,
    /// The policy's verdict on the step's action, when the policy judges
    /// this kind (`shell`, `write_file`, `read_file`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Max attempts in all when a failure of each class happens (the
    /// policy's per-class value, the step's `retry`, the cap).
    pub max_attempts: BTreeMap<FailureClass, u32>,
    /// The timeout that applies: the step's own, never above the budget.
    pub timeout_secs: u64,
    /// `false` for steps after a `finish` step, which never run.
    pub reachable: bool,
    /// Whether the run pauses before this step for a person's approval:
    /// `approval = "required"`, or a shell command whose rule says `prompt`.
    pub needs_approval: bool,
    /// `read` or `write` (declared, or the kind's default).
    pub risk: &'static str,
    /// The receipt key, with runtime references marked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The `when` condition as text, and what a false one means.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
}

/// A payload field: the text as the step would see it, with each runtime
/// reference shown as `⟨expr⟩`.
#[derive(Debug, Clone, Serialize)]
pub struct PayloadField {
    pub name: String,
    pub shown: String,
    /// The references filled in at run time (`last.output_text`, …).
    pub runtime: Vec<String>,
}

/// The policy's verdict on one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// `allow`, `forbidden`, or `runtime` (it depends on step output).
    pub decision: &'static str,
    /// The rule that decides (`shell.blocked`, a rule id, `files.parent`…),
    /// or null when the decision is made at run time.
    pub rule: Option<String>,
    pub reason: String,
}

impl Preview {
    /// The preview of `plan` under `policy`; `route` when a goal chose it.
    pub fn new(plan: &Plan, policy: &Policy, route: Option<RouteDecision>) -> Preview {
        let rules = PathRules::new(&policy.files);
        let budget = policy.budget.lowered_by(&plan.budget);
        let finish = plan.steps.iter().position(|step| matches!(step.action, Action::Finish { .. }));
        let steps = plan
            .steps
            .iter()
            .enumerate()
            .map(|(index, step)| {
                let verdict = verdict(step, policy, &rules);
                let prompt = verdict.as_ref().is_some_and(|verdict| verdict.decision == "prompt");
                let mut payload = payload(step);
                if let Action::Agent(agent) = &step.action {
                    payload.push(PayloadField {
                        name: "waits".to_string(),
                        shown: agent_waits(step, agent, policy),
                        runtime: Vec::new(),
                    });
                }
                StepPreview {
                    number: index + 1,
                    id: step.id.clone(),
                    kind: step.action.kind(),
                    payload,
                    verdict,
                    max_attempts: FailureClass::CONFIGURABLE
                        .into_iter()
                        .map(|class| (class, policy.retry.attempts_for(class, step.retry)))
                        .collect(),
                    timeout_secs: step.timeout_secs.unwrap_or(budget.step_timeout_secs).min(budget.step_timeout_secs),
                    reachable: finish.is_none_or(|finish| index <= finish),
                    needs_approval: step.approval || prompt,
                    risk: step.risk().as_str(),
                    idempotency_key: step.idempotency_key.as_ref().map(show_template),
                    when: step.when.as_ref().map(|condition| {
                        let otherwise = match condition.otherwise {
                            WhenFalse::Skip => "skip the step",
                            WhenFalse::AlreadySatisfied => "end the run done (already_satisfied)",
                            WhenFalse::Fail => "end the run failed (condition_failed)",
                        };
                        format!("{}; otherwise {otherwise}", condition.describe(show_template))
                    }),
                }
            })
            .collect();
        Preview {
            plan: PlanSummary {
                id: plan.id.clone(),
                path: plan.source.path.clone(),
                description: plan.description.clone(),
                keywords: plan.keywords.clone(),
                expected_status: plan.expected_status.to_string(),
                verify: plan.verify.iter().map(describe_check).collect(),
                inputs: plan.inputs.clone(),
            },
            route: route.map(|decision| RoutePreview { why: decision.explanation(), decision }),
            policy: PolicySummary {
                name: policy.name.clone(),
                path: policy.source.path.clone(),
                budget: budget.clone(),
                retry_cap: policy.retry.cap,
            },
            steps,
            findings: Vec::new(),
        }
    }
}

/// One `[[verify]]` check as a line of text.
fn describe_check(check: &VerifyCheck) -> String {
    match check {
        VerifyCheck::File { path, contains: Some(text) } => format!("file `{path}` contains {text:?} (fresh read)"),
        VerifyCheck::File { path, contains: None } => format!("file `{path}` exists (fresh read)"),
        VerifyCheck::TicketStatus { ticket_id, equals } => {
            format!("ticket `{ticket_id}` has status {equals:?} (fresh look-up)")
        }
        VerifyCheck::Receipt { step } => format!("the receipt of step `{step}` matches its intent"),
    }
}

/// A template as static text: literal parts as written, each reference as
/// `⟨expr⟩`.
pub fn show_template(template: &Template) -> String {
    template
        .segments()
        .iter()
        .map(|segment| match segment {
            Segment::Literal(text) => text.clone(),
            Segment::Ref(reference) => format!("⟨{}⟩", reference.expr),
        })
        .collect()
}

fn field(name: &str, template: &Template) -> PayloadField {
    PayloadField {
        name: name.to_string(),
        shown: show_template(template),
        runtime: template.references().map(|reference| reference.expr.clone()).collect(),
    }
}

/// A `json` document as written, with the references of its leaves.
fn json_field(json: &crate::template::JsonTemplate) -> PayloadField {
    let templates = json.templates();
    let shown = serde_json::to_string(json).unwrap_or_default();
    let runtime = templates.iter().flat_map(|leaf| leaf.references().map(|r| r.expr.clone())).collect();
    PayloadField { name: "json".to_string(), shown, runtime }
}

fn payload(step: &Step) -> Vec<PayloadField> {
    match &step.action {
        Action::Shell { command, cwd, stdin } => {
            let shown = command.iter().map(|token| quote(&show_template(token))).collect::<Vec<_>>().join(" ");
            let runtime = command.iter().flat_map(|token| token.references().map(|r| r.expr.clone())).collect();
            let mut fields = vec![PayloadField { name: "command".to_string(), shown, runtime }];
            if !step.env.is_empty() {
                // Names and templates only: a secret shows as its reference.
                let shown = step
                    .env
                    .iter()
                    .map(|(name, value)| format!("{name}={}", quote(&show_template(value))))
                    .collect::<Vec<_>>()
                    .join(" ");
                let runtime = step.env.values().flat_map(|value| value.references().map(|r| r.expr.clone())).collect();
                fields.push(PayloadField { name: "env".to_string(), shown, runtime });
            }
            fields.extend(cwd.iter().map(|cwd| field("cwd", cwd)));
            fields.extend(stdin.iter().map(|stdin| field("stdin", stdin)));
            fields
        }
        Action::WriteFile { path, content, json } => {
            let mut fields = vec![field("path", path)];
            fields.extend(content.iter().map(|content| field("content", content)));
            fields.extend(json.as_ref().map(json_field));
            fields
        }
        Action::ReadFile { path } => vec![field("path", path)],
        Action::Finish { message } => message.iter().map(|message| field("message", message)).collect(),
        Action::Flaky { failures, output } => vec![
            PayloadField { name: "failures".to_string(), shown: failures.to_string(), runtime: Vec::new() },
            field("output", output),
        ],
        Action::TicketLookup { ticket_id } | Action::TicketClose { ticket_id } => {
            vec![PayloadField { name: "ticket_id".to_string(), shown: ticket_id.clone(), runtime: Vec::new() }]
        }
        Action::Mcp { server, tool, arguments } => {
            let templates = arguments.templates();
            let runtime = templates.iter().flat_map(|leaf| leaf.references().map(|r| r.expr.clone())).collect();
            vec![
                PayloadField { name: "server".to_string(), shown: server.clone(), runtime: Vec::new() },
                PayloadField { name: "tool".to_string(), shown: tool.clone(), runtime: Vec::new() },
                PayloadField {
                    name: "arguments".to_string(),
                    shown: serde_json::to_string(arguments).unwrap_or_default(),
                    runtime,
                },
            ]
        }
        Action::Http { method, url, headers, body, json, .. } => {
            let mut fields =
                vec![PayloadField { name: "method".to_string(), shown: method.clone(), runtime: Vec::new() }];
            fields.push(field("url", url));
            // Names and templates only: a secret shows as its reference.
            fields.extend(headers.iter().map(|(name, value)| field(&format!("headers.{name}"), value)));
            fields.extend(body.iter().map(|body| field("body", body)));
            fields.extend(json.as_ref().map(json_field));
            fields
        }
        Action::Agent(agent) => vec![
            field("goal", &agent.goal),
            PayloadField { name: "tools".to_string(), shown: agent.tools.join(", "), runtime: Vec::new() },
            PayloadField { name: "model".to_string(), shown: agent.model.clone(), runtime: Vec::new() },
            PayloadField { name: "max_turns".to_string(), shown: agent.max_turns.to_string(), runtime: Vec::new() },
        ],
    }
}

/// Which of an agent step's proposals wait for a person's approval before
/// they run: all of them when the step requires approval, else the writes
/// (`write_file`, `ticket_close`, an MCP tool, an HTTP rule's methods other
/// than `GET` and `HEAD`) and the shell rules that say `prompt`.
fn agent_waits(step: &Step, agent: &crate::model::AgentSpec, policy: &Policy) -> String {
    use crate::model::{AgentTool, Decision};
    if step.approval {
        return "every proposed action (the step requires approval)".to_string();
    }
    let waiting: Vec<String> = agent
        .tools
        .iter()
        .filter_map(|name| match policy.agent_tool(name)? {
            AgentTool::WriteFile | AgentTool::TicketClose | AgentTool::Mcp(..) => Some(name.clone()),
            AgentTool::Http(index, _) => {
                let writes: Vec<&str> = policy.http.allow[index]
                    .methods
                    .iter()
                    .map(String::as_str)
                    .filter(|method| !crate::model::is_safe_method(method))
                    .collect();
                (!writes.is_empty()).then(|| format!("{name} ({})", writes.join(", ")))
            }
            AgentTool::Shell(index, _) => {
                (policy.shell.allow[index].decision == Decision::Prompt).then(|| format!("{name} (rule says prompt)"))
            }
            AgentTool::ReadFile | AgentTool::TicketLookup => None,
        })
        .collect();
    if waiting.is_empty() {
        "nothing: no offered tool writes or asks".to_string()
    } else {
        format!("a proposal of {} waits for a person's approval", waiting.join(", "))
    }
}

/// An argv token as a reader would type it.
fn quote(token: &str) -> String {
    display_argv(std::slice::from_ref(&token.to_string()))
}

fn verdict(step: &Step, policy: &Policy, rules: &PathRules) -> Option<Verdict> {
    match &step.action {
        Action::Shell { command, .. } => Some(shell_verdict(command, policy, rules)),
        Action::WriteFile { path, .. } | Action::ReadFile { path } => Some(path_verdict(path, rules)),
        Action::Http { method, url, .. } if url.is_literal() => {
            let evaluation = crate::policy::evaluate_http_url(&policy.http, method, url.source());
            Some(Verdict {
                decision: evaluation.decision.as_str(),
                rule: Some(evaluation.rule),
                reason: evaluation.reason,
            })
        }
        Action::Finish { .. }
        | Action::Flaky { .. }
        | Action::TicketLookup { .. }
        | Action::TicketClose { .. }
        | Action::Http { .. }
        | Action::Agent(_) => None,
        Action::Mcp { server, tool, .. } => Some(mcp_verdict(server, tool, policy)),
    }
}

/// An `mcp` step: allowed when the policy declares the server and pins the
/// tool (whether the definition still matches shows only when it runs).
fn mcp_verdict(server: &str, tool: &str, policy: &Policy) -> Verdict {
    let pinned = policy.mcp.servers.get(server).and_then(|declared| declared.tools.get(tool));
    Verdict {
        decision: if pinned.is_some() { "allow" } else { "forbidden" },
        rule: Some(format!("mcp.servers.{server}.tools.{tool}")),
        reason: match pinned {
            Some(digest) => format!("pinned at {digest}; checked against the server's definition when the step runs"),
            None => format!("policy `{}` does not pin tool `{tool}` of server `{server}`", policy.name),
        },
    }
}

fn shell_verdict(command: &[Template], policy: &Policy, rules: &PathRules) -> Verdict {
    let literal: Option<Vec<String>> =
        command.iter().map(|token| token.is_literal().then(|| token.source().to_string())).collect();
    if let Some(argv) = literal {
        let evaluation = evaluate_argv(&policy.shell, rules, &argv);
        return Verdict {
            decision: evaluation.decision.as_str(),
            rule: Some(evaluation.rule),
            reason: evaluation.reason,
        };
    }
    // The program is always literal: what depends only on it is certain.
    let program = command.first().map(|token| token.source().to_string()).unwrap_or_default();
    let alone = evaluate_argv(&policy.shell, rules, std::slice::from_ref(&program));
    let certain = matches!(alone.rule.as_str(), "shell.empty" | "shell.bare-name" | "shell.blocked");
    if certain {
        return Verdict { decision: alone.decision.as_str(), rule: Some(alone.rule), reason: alone.reason };
    }
    if !policy.shell.allow.iter().any(|rule| rule.program == program) {
        return Verdict {
            decision: "forbidden",
            rule: Some("shell.default-deny".to_string()),
            reason: format!("no `shell.allow` rule names `{program}`"),
        };
    }
    Verdict {
        decision: "runtime",
        rule: None,
        reason: "decided at run time: the arguments hold step output".to_string(),
    }
}

fn path_verdict(path: &Template, rules: &PathRules) -> Verdict {
    if !path.is_literal() {
        return Verdict {
            decision: "runtime",
            rule: None,
            reason: "decided at run time: the path holds `run.id`".to_string(),
        };
    }
    match rules.check_path(path.source()) {
        Ok(_) => Verdict {
            decision: "allow",
            rule: Some("files.confined".to_string()),
            reason: "inside the workspace and not denied by `files.deny`".to_string(),
        },
        Err(denied) => Verdict { decision: "forbidden", rule: Some(denied.rule.clone()), reason: denied.to_string() },
    }
}
