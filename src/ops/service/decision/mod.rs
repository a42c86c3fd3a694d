//! Decision backends of the controller loop: what to do next.
//!
//! | file | holds |
//! |---|---|
//! | `choices.rs` | the closed set a decision chooses from, and its JSON Schema |
//! | `prompt.rs` | the request's user message: fixed instructions, quoted run data |
//! | `answer.rs` | validation of an answer against the offered choices |
//! | `evidence.rs` | what a model answered, kept with every decision |
//! | `http.rs` | the JSON call and probe every backend makes |
//! | `ollama.rs`, `openai.rs` | the two model APIs |
//! | `stub.rs` | the deterministic rules (and the fallback) |
//!
//! The backend is chosen once at start-up ([`DecisionBackend::select`]): the
//! [`stub`] rules, an [`ollama`] server or an [`openai`]-compatible server.
//! An explicitly chosen model backend that does not answer its probe is a
//! start-up error; only `auto` falls back to the stub, with a note.
//!
//! Every model request carries the JSON Schema of the offered choices
//! (structured output), and every answer is validated after decoding; an
//! answer that is invalid, truncated, slow or unreachable falls back to the
//! stub rules. The decision records which happened in `mode`, and the model
//! call's [`Evidence`] in `evidence`:
//!
//! | mode | meaning |
//! |---|---|
//! | `ollama` / `openai` | the model's answer was valid and used |
//! | `ollama-fallback` / `openai-fallback` | the model was called, its answer was unusable: stub rules used |
//! | `stub` | the stub backend (chosen, or `auto` found no Ollama at start-up) |

pub mod answer;
pub mod choices;
pub mod evidence;
pub mod http;
pub mod ollama;
pub mod openai;
pub mod prompt;
pub mod stub;

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::model::DecisionSettings;
use crate::model::FailureClass;
use crate::ops::service::config::{BackendChoice, OllamaSettings, OpenAiSettings, ServiceConfig};
use crate::ops::service::decision::answer::{Choice, parse_decision};
use crate::ops::service::decision::choices::Choices;
use crate::ops::service::decision::evidence::{Evidence, Reply, Trust, Verdict, cap};
use crate::ops::service::decision::http::BackendError;
use crate::ops::service::decision::openai::ResponseFormat;
use crate::runtime::Clock;

/// What the controller does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    RunPlan,
    Stop,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::RunPlan => "run_plan",
            Action::Stop => "stop",
        }
    }
}

/// What a decision is based on.
#[derive(Debug, Clone)]
pub struct DecisionContext<'a> {
    /// The goal the last run got, or the user's before the first (rewritten
    /// by recovery, if applied; never by a model). Each offered plan carries
    /// the goal its run gets.
    pub goal: &'a str,
    pub original_goal: &'a str,
    pub iteration: u32,
    pub max_iterations: u32,
    /// Status of the last bridge run; `None` before the first.
    pub last_status: Option<&'a str>,
    pub last_agent_status: Option<&'a str>,
    pub last_failure_class: Option<FailureClass>,
    /// The last run's error text: run output, untrusted.
    pub last_error: Option<&'a str>,
    pub recovery_attempted: bool,
    /// A recovery rewrite was applied after the last run and not yet tried.
    pub recovery_pending: bool,
    /// What this decision may choose.
    pub choices: &'a Choices,
}

/// The choices a decision was offered, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offered {
    pub actions: Vec<String>,
    pub plan_ids: Vec<String>,
    /// Why `run_plan` was not offered.
    pub run_withheld: Option<String>,
}

impl Offered {
    fn of(choices: &Choices) -> Self {
        Offered {
            actions: choices.actions().into_iter().map(str::to_string).collect(),
            plan_ids: choices.plan_ids().into_iter().map(str::to_string).collect(),
            run_withheld: choices.run_withheld.clone(),
        }
    }
}

/// A decision as recorded in controller state and audit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub action: Action,
    /// The plan `run_plan` runs; `null` for `stop`.
    pub plan_id: Option<String>,
    /// The goal the run gets: the offered plan's (the user's, or a recovery
    /// rule's rewrite), never a model's text.
    pub goal: String,
    pub reason: String,
    /// `stub`, `ollama`, `ollama-fallback`, `openai`, `openai-fallback`.
    pub mode: String,
    /// Whether a model's answer was valid and used.
    pub parsed_success: bool,
    /// Whether the stub rules replaced an unusable model answer.
    pub fallback_used: bool,
    /// Why the model's answer was not used (`null` otherwise).
    pub fallback_reason: Option<String>,
    pub offered: Offered,
    /// The model call (`null` for the stub backend).
    pub evidence: Option<Evidence>,
}

impl Decision {
    /// Whether `other` makes the same choice for the same goal.
    pub fn same_choice(&self, other: &Decision) -> bool {
        self.action == other.action && self.plan_id == other.plan_id && self.goal == other.goal
    }
}

/// Which model API a backend speaks.
#[derive(Debug, Clone)]
pub enum ModelApi {
    Ollama(OllamaSettings),
    OpenAi(OpenAiSettings),
}

/// A model backend: its API, the request settings, and what the server
/// refused so far.
pub struct ModelBackend {
    pub api: ModelApi,
    pub client: reqwest::Client,
    pub settings: DecisionSettings,
    /// Set when an OpenAI-compatible server refused `json_schema`: why.
    schema_refused: Mutex<Option<String>>,
}

impl ModelBackend {
    pub fn new(api: ModelApi, client: reqwest::Client, settings: DecisionSettings) -> Self {
        ModelBackend { api, client, settings, schema_refused: Mutex::new(None) }
    }

    fn name(&self) -> &'static str {
        match self.api {
            ModelApi::Ollama(_) => "ollama",
            ModelApi::OpenAi(_) => "openai",
        }
    }

    fn model(&self) -> &str {
        match &self.api {
            ModelApi::Ollama(settings) => &settings.model,
            ModelApi::OpenAi(settings) => &settings.model,
        }
    }

    /// One request; returns the reply, the response format asked and a
    /// note on it (why `json_object` was used).
    async fn call(&self, context: &DecisionContext<'_>) -> (Result<Reply, BackendError>, &'static str, Option<String>) {
        let schema = context.choices.schema();
        let user = prompt::user_message(context);
        let system = &self.settings.system_prompt;
        match &self.api {
            ModelApi::Ollama(api) => {
                let reply = ollama::generate(&self.client, api, &self.settings, system, &user, &schema).await;
                (reply, "ollama_format_schema", None)
            }
            ModelApi::OpenAi(api) => {
                let refused = self.schema_refused.lock().map(|refused| refused.clone()).unwrap_or(None);
                let ask = |format| openai::complete(&self.client, api, &self.settings, system, &user, &schema, format);
                if let Some(why) = refused {
                    let note = format!("the server refused `json_schema` earlier ({why})");
                    return (ask(ResponseFormat::JsonObject).await, ResponseFormat::JsonObject.as_str(), Some(note));
                }
                match ask(ResponseFormat::JsonSchema).await {
                    Err(error) if error.is_refusal() => {
                        let reply = ask(ResponseFormat::JsonObject).await;
                        // Remembered only when the other shape worked: a
                        // server that fails both ways may just be down.
                        if reply.is_ok()
                            && let Ok(mut refused) = self.schema_refused.lock()
                        {
                            *refused = Some(error.to_string());
                        }
                        let note =
                            format!("the server refused `json_schema` ({error}); asked again with `json_object`");
                        (reply, ResponseFormat::JsonObject.as_str(), Some(note))
                    }
                    reply => (reply, ResponseFormat::JsonSchema.as_str(), None),
                }
            }
        }
    }
}

/// A decision backend, fixed at start-up.
pub enum DecisionBackend {
    Stub,
    Model(ModelBackend),
}

/// The outcome of start-up selection.
pub struct Selection {
    pub backend: DecisionBackend,
    /// Whether Ollama answered its probe (the `ollama` adapter's mode).
    pub ollama_up: bool,
    /// Why `auto` chose the stub, for the start-up line and `/health`.
    pub note: Option<String>,
}

impl DecisionBackend {
    /// Picks the backend per `PLANRUN_DECISION_BACKEND`. `auto` probes
    /// Ollama (`GET /api/tags`) and takes the stub when it does not answer;
    /// an explicit `ollama` or `openai` (`GET {base}/models`) that does not
    /// answer is an `Err` naming what was tried.
    pub async fn select(
        config: &ServiceConfig,
        settings: &DecisionSettings,
        client: &reqwest::Client,
    ) -> Result<Selection, String> {
        let probe = config.timeouts.probe;
        let ollama_probe = ollama::probe(client, &config.ollama, probe).await;
        let ollama_up = ollama_probe.is_ok();
        let model = |api| DecisionBackend::Model(ModelBackend::new(api, client.clone(), settings.clone()));
        let tried_ollama = format!("`GET {}/api/tags`", config.ollama.host);
        let (backend, note) = match (config.backend, ollama_probe) {
            (BackendChoice::Stub, _) => (DecisionBackend::Stub, None),
            (BackendChoice::Auto | BackendChoice::Ollama, Ok(())) => {
                (model(ModelApi::Ollama(config.ollama.clone())), None)
            }
            (BackendChoice::Auto, Err(error)) => {
                (DecisionBackend::Stub, Some(format!("auto: no Ollama answered {tried_ollama} ({error}); stub rules")))
            }
            (BackendChoice::Ollama, Err(error)) => {
                return Err(format!(
                    "decision backend `ollama` (PLANRUN_DECISION_BACKEND) does not answer: tried {tried_ollama}: {error}"
                ));
            }
            (BackendChoice::OpenAi, _) => {
                if let Err(error) = openai::probe(client, &config.openai, probe).await {
                    return Err(format!(
                        "decision backend `openai` (PLANRUN_DECISION_BACKEND) does not answer: tried `GET {}/models`: {error}",
                        config.openai.base_url
                    ));
                }
                (model(ModelApi::OpenAi(config.openai.clone())), None)
            }
        };
        Ok(Selection { backend, ollama_up, note })
    }

    /// `stub`, `ollama` or `openai`.
    pub fn name(&self) -> &'static str {
        match self {
            DecisionBackend::Stub => "stub",
            DecisionBackend::Model(model) => model.name(),
        }
    }

    /// The model asked, if any.
    pub fn model(&self) -> Option<&str> {
        match self {
            DecisionBackend::Stub => None,
            DecisionBackend::Model(model) => Some(model.model()),
        }
    }

    /// Decides the next step among `context.choices`; never fails (the stub
    /// is the fallback). `clock` measures the call's latency.
    pub async fn decide(&self, context: &DecisionContext<'_>, clock: &dyn Clock) -> Decision {
        let model = match self {
            DecisionBackend::Stub => {
                let (choice, reason) = stub::decide(context);
                return decision(context, choice, reason, "stub".to_string(), None, None);
            }
            DecisionBackend::Model(model) => model,
        };
        let started = clock.now();
        let (reply, response_format, response_format_note) = model.call(context).await;
        let latency_ms = clock.now().duration_since(started).as_millis().max(0) as u64;
        let checked = match &reply {
            Err(error) => Err(error.to_string()),
            Ok(reply) if reply.truncated() => Err("truncated answer (the model hit its token limit)".to_string()),
            Ok(reply) => {
                parse_decision(&reply.text, context.choices).map_err(|error| format!("invalid answer: {error}"))
            }
        };
        let (raw_answer, raw_answer_truncated) = match &reply {
            Ok(reply) => {
                let (text, cut) = cap(&reply.text);
                (Some(text), cut)
            }
            Err(_) => (None, false),
        };
        let reply = reply.ok();
        let mut evidence = Evidence {
            backend: model.name().to_string(),
            model: model.model().to_string(),
            response_format: response_format.to_string(),
            response_format_note,
            request_id: reply.as_ref().and_then(|reply| reply.request_id.clone()),
            latency_ms,
            finish_reason: reply.as_ref().and_then(|reply| reply.finish_reason.clone()),
            usage: reply.as_ref().and_then(|reply| reply.usage.clone()),
            raw_answer,
            raw_answer_truncated,
            raw_answer_trust: Trust::Untrusted,
            verdict: Verdict::Accepted,
            verdict_reason: String::new(),
            stripped: None,
        };
        match checked {
            Ok(parsed) => {
                let valid = match parsed.stripped {
                    Some(stripped) => format!("valid once stripped of {}", stripped.describe()),
                    None => "valid".to_string(),
                };
                evidence.verdict_reason = match &parsed.choice {
                    Choice::RunPlan(plan) => format!("{valid}: `run_plan` with offered plan `{plan}`"),
                    Choice::Stop => format!("{valid}: `stop` is offered"),
                };
                evidence.stripped = parsed.stripped;
                let reason = parsed.reason.unwrap_or_default();
                decision(context, parsed.choice, reason, model.name().to_string(), None, Some(evidence))
            }
            Err(why) => {
                evidence.verdict = Verdict::Rejected;
                evidence.verdict_reason = why.clone();
                let (choice, reason) = stub::decide(context);
                let mode = format!("{}-fallback", model.name());
                decision(context, choice, reason, mode, Some(why), Some(evidence))
            }
        }
    }
}

fn decision(
    context: &DecisionContext<'_>,
    choice: Choice,
    reason: String,
    mode: String,
    fallback_reason: Option<String>,
    evidence: Option<Evidence>,
) -> Decision {
    let parsed_success = evidence.is_some() && fallback_reason.is_none();
    let (action, plan_id) = match choice {
        Choice::RunPlan(plan) => (Action::RunPlan, Some(plan)),
        Choice::Stop => (Action::Stop, None),
    };
    // The goal the chosen plan is offered for (never a model's text).
    let goal = plan_id.as_deref().and_then(|id| context.choices.plan(id)).map_or(context.goal, |plan| &plan.goal);
    Decision {
        action,
        plan_id,
        goal: goal.to_string(),
        reason,
        mode,
        parsed_success,
        fallback_used: fallback_reason.is_some(),
        fallback_reason,
        offered: Offered::of(context.choices),
        evidence,
    }
}
