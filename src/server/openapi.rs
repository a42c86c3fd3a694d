//! The OpenAPI 3.1 document served at `GET /openapi.json`. Written by hand
//! next to the handlers; `tests/server.rs` checks that every route is in it,
//! and `.ci/run` runs schemathesis against a live service (with and without
//! a token) so that the document and the behaviour cannot drift apart:
//! every status a route answers is listed, and every value a request schema
//! allows is one the handler accepts (and the other way round).
//!
//! Bearer auth is declared (`security`, the 401 answers) only when the
//! service has `PLANRUN_API_TOKEN`: the document describes the running
//! service.

use serde_json::{Value, json};

use crate::runtime::interpreter::MAX_ANSWER_BYTES;

/// A goal's pattern: a character that is not Unicode `White_Space` (what
/// `char::is_whitespace` uses), spelt out because `\s` differs between
/// regex dialects (ECMA adds U+FEFF, Python the U+001C–U+001F separators).
const NOT_ONLY_WHITE_SPACE: &str =
    "[^\\t\\n\\x0b\\x0c\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";

/// No C0 or C1 control character (`char::is_control`).
const NO_CONTROL_CHARACTERS: &str = "^[^\\x00-\\x1f\\x7f-\\x9f]*$";

/// The service's document; `auth` says whether a bearer token is required.
pub fn document(auth: bool) -> Value {
    let mut document = full_document();
    if !auth {
        if let Some(root) = document.as_object_mut() {
            root.remove("security");
        }
        if let Some(paths) = document["paths"].as_object_mut() {
            for operation in paths.values_mut().filter_map(Value::as_object_mut).flat_map(|path| path.values_mut()) {
                if let Some(responses) = operation["responses"].as_object_mut() {
                    responses.remove("401");
                }
                if let Some(operation) = operation.as_object_mut() {
                    operation.remove("security");
                }
            }
        }
    }
    document
}

fn full_document() -> Value {
    let goal = json!({"type": "string", "minLength": 1, "pattern": NOT_ONLY_WHITE_SPACE,
                      "description": "holds a character that is not white space"});
    let error = json!({"$ref": "#/components/schemas/Error"});
    let error_response =
        |description: &str| json!({"description": description, "content": {"application/json": {"schema": error}}});
    let bridge = json!({"$ref": "#/components/schemas/BridgeRun"});
    let controller = json!({"$ref": "#/components/schemas/ControllerRun"});
    let run_id = json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^(?!\\.{1,2}$)[A-Za-z0-9._-]{1,64}$"}}]);
    let nullable = |kind: &str| json!({"type": [kind, "null"]});
    let decision = json!({
        "type": "object",
        "description": "One decision: a choice from the closed set planrun offered (`offered`), and the model call's evidence.",
        "properties": {
            "iteration": {"type": "integer"},
            "action": {"type": "string", "enum": ["run_plan", "stop"]},
            "plan_id": nullable("string"),
            "goal": {"type": "string", "description": "the goal the run gets: the user's or a recovery rule's, never a model's"},
            "reason": {"type": "string"},
            "mode": {"type": "string", "enum": ["stub", "ollama", "ollama-fallback", "openai", "openai-fallback"]},
            "parsed_success": {"type": "boolean"},
            "fallback_used": {"type": "boolean"},
            "fallback_reason": nullable("string"),
            "offered": {"type": "object", "properties": {
                "actions": {"type": "array", "items": {"enum": ["run_plan", "stop"]}},
                "plan_ids": {"type": "array", "items": {"type": "string"}},
                "run_withheld": nullable("string")}},
            "evidence": {"oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/DecisionEvidence"}]}
        }
    });
    let evidence = json!({
        "type": "object",
        "properties": {
            "backend": {"enum": ["ollama", "openai"]},
            "model": {"type": "string"},
            "response_format": {"enum": ["json_schema", "json_object", "ollama_format_schema"]},
            "response_format_note": nullable("string"),
            "request_id": nullable("string"),
            "latency_ms": {"type": "integer", "minimum": 0},
            "finish_reason": nullable("string"),
            "usage": {"type": ["object", "null"]},
            "raw_answer": {"type": ["string", "null"], "description": "at most 4096 bytes; untrusted model output"},
            "raw_answer_truncated": {"type": "boolean"},
            "raw_answer_trust": {"const": "untrusted"},
            "verdict": {"enum": ["accepted", "rejected"]},
            "verdict_reason": {"type": "string"},
            "stripped": {"type": "object", "description": "present when text around the JSON object was stripped before validation",
                         "properties": {"chars_before": {"type": "integer", "minimum": 0},
                                        "chars_after": {"type": "integer", "minimum": 0},
                                        "fence": {"type": "boolean"}}}
        }
    });
    // `GET /runs` and its page, added after the document's `json!` (which is
    // at the macro's recursion limit).
    let run_page = json!({
        "type": "object", "required": ["runs", "next_after"],
        "properties": {
            "runs": {"type": "array", "items": {"oneOf": [bridge, {
                "type": "object", "required": ["run_id", "status", "error"], "description": "a record that fails verification",
                "properties": {"run_id": {"type": "string"}, "status": {"const": "unreadable"}, "error": {"type": "string"}}}]}},
            "next_after": {"type": ["string", "null"], "description": "pass as `after` for the next page; null on the last page"}
        }
    });
    let list_runs = json!({
        "summary": "The bridge runs, newest first, a page at a time (each as stored; GET /runs/{id} reads a waiting run through)",
        "parameters": [
            {"name": "limit", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}},
            {"name": "after", "in": "query", "required": false, "description": "the `next_after` of the previous page",
             "schema": {"type": "string", "pattern": "^(?!\\.{1,2}$)[A-Za-z0-9._-]{1,64}$"}}
        ],
        "responses": {
            "200": {"description": "one page", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunPage"}}}},
            "400": error_response("invalid_paging: `limit` not 1..100, `after` not a run id, or an unknown parameter"),
            "404": error_response("run_not_found: `after` names no bridge run"),
            "401": error_response("missing or wrong bearer token"),
            "500": error_response("records_failed: the records folder could not be read")
        }
    });
    let schemas = json!({
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
                        "code": {"type": "string"}, "message": {"type": "string"}}}}
                },
                "RunRequest": {
                    "type": "object", "additionalProperties": false, "required": ["goal"],
                    "properties": {
                        "goal": goal,
                        "adapter": {"type": "string", "default": "agent",
                                    "enum": ["stub", "local_echo", "agent", "openai", "ollama", "cloudcode"]},
                        "wait": {"type": "boolean", "default": true,
                                 "description": "false: answer 202 once the run is recorded (status queued), drive it after"},
                        "inputs": {"type": "object", "additionalProperties": true,
                                   "description": "the plan's inputs (`agent` adapter only), checked against the plan the goal routes to before the run is accepted"}
                    }
                },
                "ControllerRequest": {
                    "type": "object", "additionalProperties": false, "required": ["goal"],
                    "properties": {
                        "goal": goal,
                        "inputs": {"type": "object", "additionalProperties": true,
                                   "description": "the inputs of the plan the goal routes to, checked before the controller run is created; each run of that plan gets them"}
                    }
                },
                "BridgeRun": {
                    "type": "object",
                    "properties": {
                        "run_id": {"type": "string"},
                        "goal": {"type": "string"},
                        "status": {"type": "string", "enum": ["queued", "created", "running", "waiting_approval", "waiting_input", "done", "failed", "rejected", "cancelled"],
                                   "description": "`waiting_approval` and `waiting_input` are the only statuses a finished request returns that are not final: \
                                                   the agent run is paused before a step that needs approval (see `pending_action`; \
                                                   POST /runs/{id}/approve or /reject decides), or its agent step asked a person \
                                                   a question (see `pending_question`; POST /runs/{id}/answer answers). `rejected`: a person rejected the pending action. \
                                                   `cancelled`: a person cancelled the agent run (`planrun cancel`). \
                                                   `queued`: accepted with `\"wait\": false` and not driven yet."},
                        "adapter": {"type": "string"},
                        "adapter_mode": {"type": "string", "enum": ["real", "stub", "unavailable"]},
                        "instruction": {"type": "string"},
                        "response": nullable("string"),
                        "error": nullable("string"),
                        "exit_code": nullable("integer"),
                        "agent_run_id": nullable("string"),
                        "agent_final_status": nullable("string"),
                        "agent_state_path": nullable("string"),
                        "inputs": {"type": "object", "additionalProperties": true},
                        "pending_action": {"$ref": "#/components/schemas/PendingAction"},
                        "pending_question": {"$ref": "#/components/schemas/PendingQuestion"},
                        "controller_run_id": {"type": "string"},
                        "created_at": {"type": "string", "format": "date-time"},
                        "updated_at": {"type": "string", "format": "date-time"}
                    }
                },
                "PendingAction": {
                    "type": "object",
                    "description": "The agent run's frozen action; present exactly while status is waiting_approval. \
                                    `fingerprint` is SHA-256 of the canonical JSON of {action, idempotency_key, kind, risk, scope}.",
                    "required": ["step_id", "kind", "action", "risk", "idempotency_key", "scope", "fingerprint", "state_version", "required_by", "requested_at"],
                    "properties": {
                        "step_id": {"type": "string"},
                        "kind": {"type": "string"},
                        "action": {"type": "object"},
                        "risk": {"type": "string"},
                        "idempotency_key": nullable("string"),
                        "scope": {"type": "string"},
                        "fingerprint": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                        "state_version": {"type": "integer", "minimum": 0},
                        "required_by": {"type": "string", "enum": ["step", "risk", "policy"],
                                        "description": "`step`: the step asks for approval; `risk`: a write an agent step's model proposed; `policy`: a rule that says `prompt`"},
                        "requested_at": {"type": "string", "format": "date-time"},
                        "provenance": {
                            "type": "array",
                            "description": "an agent step's proposal only: where each argument was seen before the model proposed it (the goal, an earlier observation with its source and trust, or nowhere)",
                            "items": {
                                "type": "object", "required": ["argument", "value", "source"],
                                "properties": {"argument": {"type": "string"}, "value": {"type": "string"}, "source": {"type": "string"}}
                            }
                        }
                    }
                },
                "ApproveRequest": {
                    "type": "object", "additionalProperties": false, "required": ["fingerprint"],
                    "properties": {
                        "fingerprint": {"type": "string", "pattern": "^[0-9a-fA-F]{64}$",
                                        "description": "the pending action's fingerprint: an operator approves what they saw"},
                        "scope": {"type": "string", "description": "refused unless it is the pending action's scope"},
                        "state_version": {"type": "integer", "minimum": 0, "maximum": u64::MAX, "description": "refused unless it is the version that froze the action"},
                        "expires_in_secs": {"type": "integer", "minimum": 1, "maximum": 604800, "default": 3600},
                        "approved_by": {"type": "string", "maxLength": 200, "pattern": NO_CONTROL_CHARACTERS,
                                        "description": "trimmed; empty means not given"}
                    }
                },
                "RejectRequest": {
                    "type": "object", "additionalProperties": false,
                    "properties": {"reason": {"type": "string", "maxLength": 2000, "pattern": NO_CONTROL_CHARACTERS,
                                             "description": "trimmed; empty means not given"}}
                },
                "Decision": decision,
                "DecisionEvidence": evidence,
                "ControllerRun": {
                    "type": "object",
                    "properties": {
                        "controller_run_id": {"type": "string"},
                        "goal": {"type": "string"},
                        "plan_id": {"type": ["string", "null"], "description": "the plan the goal routes to; its last run is the outcome"},
                        "inputs": {"type": "object", "additionalProperties": true, "description": "the inputs the request gave that plan (absent when none)"},
                        "current_goal": {"type": "string"},
                        "status": {"type": "string", "enum": ["running", "done", "failed", "waiting_approval", "waiting_input"]},
                        "final_status": {"type": ["string", "null"], "enum": ["done", "failed", "waiting_approval", "waiting_input", null]},
                        "stop_reason": {"type": ["string", "null"], "enum": ["decision_stop", "max_iterations", "consecutive_failures", "prompt_blocked", "waiting_approval", "waiting_input", "interrupted", null]},
                        "decision_mode": {"type": "string", "enum": ["stub", "ollama", "openai"]},
                        "decision_model": nullable("string"),
                        "max_iterations": {"type": "integer"},
                        "max_consecutive_failures": {"type": "integer"},
                        "iterations": {"type": "integer"},
                        "consecutive_failures": {"type": "integer"},
                        "recovery_attempted": {"type": "boolean"},
                        "recovery": {"type": ["object", "null"], "description": "the recovery rule that applied: rule_id, goal, plan_id"},
                        "decisions": {"type": "array", "items": {"$ref": "#/components/schemas/Decision"}},
                        "bridge_results": {"type": "array", "items": {"type": "object"}},
                        "linked_runs": {"type": "array", "items": {"type": "object", "properties": {
                            "bridge_run_id": {"type": "string"}, "agent_run_id": {"type": "string"}}}},
                        "error": nullable("string"),
                        "created_at": {"type": "string", "format": "date-time"},
                        "updated_at": {"type": "string", "format": "date-time"}
                    }
                },
                "Health": {
                    "type": "object",
                    "properties": {
                        "status": {"const": "ok"},
                        "version": {"type": "string"},
                        "adapters": {"type": "object", "additionalProperties": {"enum": ["real", "stub", "unavailable"]}},
                        "decision_backend": {"enum": ["stub", "ollama", "openai"]},
                        "decision_model": nullable("string"),
                        "decision_backend_note": {"type": "string", "description": "present only when `auto` found no Ollama at start-up: why the stub decides"},
                        "ollama_model": {"type": "string"},
                        "auth_required": {"type": "boolean"}
                    }
                }
    });
    let mut document = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "planrun service",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Bridge runs (one goal through one adapter) and controller runs (a bounded decide → run loop). \
                            When PLANRUN_API_TOKEN is set, every endpoint but GET /health needs `Authorization: Bearer <token>`."
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas
        },
        "security": [{"bearer": []}],
        "paths": {
            "/health": {"get": {
                "summary": "Service status, adapter modes and the decision backend (never needs a token)",
                "security": [],
                "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}}
            }},
            "/runs": {"post": {
                "summary": "Run a goal through an adapter to its end (status done or failed), or until its agent run pauses for approval (waiting_approval); with \"wait\": false, answer 202 at once and run it after",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunRequest"}}}},
                "responses": {
                    "201": {"description": "the bridge state: done, failed, or waiting_approval (paused for approval; not final)", "content": {"application/json": {"schema": bridge}}},
                    "202": {"description": "with \"wait\": false: the run is recorded (durably) as queued and will be driven; GET the Location for its state",
                            "headers": {"Location": {"description": "/runs/{id} of the accepted run", "schema": {"type": "string"}}},
                            "content": {"application/json": {"schema": bridge}}},
                    "400": error_response("malformed JSON, a goal of white space only, or unknown adapter"),
                    "401": error_response("missing or wrong bearer token"),
                    "413": error_response("body too large"),
                    "415": error_response("not application/json"),
                    "422": error_response("JSON of the wrong shape, or `inputs` the routed plan refuses (`invalid_inputs`: unknown, missing, wrong type or out of range)"),
                    "500": error_response("records_failed: records could not be written")
                }
            }},
            "/runs/{id}": {"get": {
                "summary": "A bridge run's state; a waiting run is read through to its agent run, so an approval, resume, \
                            rejection or cancel made outside the service (the CLI) shows as the agent run's real status",
                "parameters": run_id,
                "responses": {
                    "200": {"description": "the bridge state (verified: checkpoint seal, audit chain, their agreement)", "content": {"application/json": {"schema": bridge}}},
                    "400": error_response("invalid run id (also a path that is not UTF-8 once decoded)"),
                    "401": error_response("missing or wrong bearer token"),
                    "404": error_response("unknown run id"),
                    "409": error_response("records_invalid: the record fails verification"),
                    "500": error_response("records_failed: the record could not be read")
                }
            }},
            "/runs/{id}/approve": {"post": {
                "summary": "Approve the pending action of a waiting bridge run and resume its agent run to its end",
                "description": "Records the approval on the agent run (bound to the fingerprint, the state version, the scope and an expiry), \
                                resumes it and answers the new bridge state: done, failed, or waiting_approval again at the next gated step. \
                                A refused approval changes nothing. If the approval is recorded but the resume is refused \
                                (for example, it expired), the answer is 409 and the run stays waiting_approval.",
                "parameters": run_id,
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ApproveRequest"}}}},
                "responses": {
                    "200": {"description": "the new bridge state", "content": {"application/json": {"schema": bridge}}},
                    "400": error_response("malformed JSON, invalid run id, or a field out of range (fingerprint not 64 hex digits, expires_in_secs, approved_by too long or holding control characters)"),
                    "401": error_response("missing or wrong bearer token"),
                    "404": error_response("unknown run id"),
                    "409": error_response("run_not_waiting, approval_invalid (fingerprint, scope or state version mismatch, expired), \
                                           run_locked (another decision in progress), refused, records_invalid (the bridge record or the agent \
                                           run's records fail verification), plan_files_invalid"),
                    "413": error_response("body too large"),
                    "415": error_response("not application/json"),
                    "422": error_response("JSON of the wrong shape (fingerprint missing, unknown field, wrong type)"),
                    "500": error_response("records_failed: records could not be read or written")
                }
            }},
            "/runs/{id}/reject": {"post": {
                "summary": "Reject the pending action of a waiting bridge run: it never runs; the bridge run ends rejected",
                "parameters": run_id,
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RejectRequest"}}}},
                "responses": {
                    "200": {"description": "the new bridge state (status rejected)", "content": {"application/json": {"schema": bridge}}},
                    "400": error_response("malformed JSON, invalid run id, or reason too long or holding control characters"),
                    "401": error_response("missing or wrong bearer token"),
                    "404": error_response("unknown run id"),
                    "409": error_response("run_not_waiting, run_locked, refused, records_invalid"),
                    "413": error_response("body too large"),
                    "415": error_response("not application/json"),
                    "422": error_response("JSON of the wrong shape"),
                    "500": error_response("records_failed: records could not be read or written")
                }
            }},
            "/controller/runs": {"post": {
                "summary": "Run the controller loop for a goal to its end",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ControllerRequest"}}}},
                "responses": {
                    "201": {"description": "the final controller state", "content": {"application/json": {"schema": controller}}},
                    "400": error_response("malformed JSON or a goal of white space only"),
                    "401": error_response("missing or wrong bearer token"),
                    "413": error_response("body too large"),
                    "415": error_response("not application/json"),
                    "422": error_response("JSON of the wrong shape, or `inputs` the goal's plan refuses (`invalid_inputs`: unknown, missing, wrong type or out of range)"),
                    "500": error_response("records_failed: records could not be read or written")
                }
            }},
            "/controller/runs/{id}": {"get": {
                "summary": "A controller run's persisted state",
                "parameters": run_id,
                "responses": {
                    "200": {"description": "the controller state (verified: checkpoint seal, audit chain, their agreement)", "content": {"application/json": {"schema": controller}}},
                    "400": error_response("invalid run id (also a path that is not UTF-8 once decoded)"),
                    "401": error_response("missing or wrong bearer token"),
                    "404": error_response("unknown run id"),
                    "409": error_response("records_invalid: the record fails verification"),
                    "500": error_response("records_failed: the record could not be read")
                }
            }},
            "/openapi.json": {"get": {
                "summary": "This document",
                "responses": {
                    "200": {"description": "OpenAPI 3.1", "content": {"application/json": {"schema": {"type": "object"}}}},
                    "401": error_response("missing or wrong bearer token")
                }
            }}
        }
    });
    document["components"]["schemas"]["RunPage"] = run_page;
    document["paths"]["/runs"]["get"] = list_runs;
    add_answer(&mut document, &run_id, &error_response, &bridge);
    document
}

/// `POST /runs/{id}/answer`, its request and the `PendingQuestion` schema
/// (added after the document's `json!`, which is at the macro's recursion
/// limit).
fn add_answer(document: &mut Value, run_id: &Value, error_response: &dyn Fn(&str) -> Value, bridge: &Value) {
    document["components"]["schemas"]["PendingQuestion"] = json!({
        "type": "object",
        "description": "The question the agent run's agent step asked a person; present exactly while status is waiting_input. \
                        `question` is the model's text: untrusted.",
        "required": ["step_id", "turn", "question"],
        "properties": {
            "step_id": {"type": "string"},
            "turn": {"type": "integer", "minimum": 1, "description": "the agent turn that asked"},
            "question": {"type": "string"}
        }
    });
    document["components"]["schemas"]["AnswerRequest"] = json!({
        "type": "object", "additionalProperties": false, "required": ["answer"],
        "properties": {"answer": {"type": "string", "minLength": 1, "maxLength": MAX_ANSWER_BYTES, "pattern": NOT_ONLY_WHITE_SPACE,
                                  "description": "1 to 2000 bytes of UTF-8 (a character may take up to 4), holding a character that is \
                                                  not white space; the model reads it as untrusted data"}}
    });
    document["paths"]["/runs/{id}/answer"] = json!({"post": {
        "summary": "Answer the question of a bridge run waiting for input and resume its agent run to its end or its next pause",
        "description": "Records the answer on the agent run (the agent turn's observation: `source=person trust=untrusted`, sealed \
                        in its records, as `planrun answer` does), resumes it and answers the new bridge state: done, failed, \
                        or waiting_input / waiting_approval again at the next pause. A refused answer changes nothing.",
        "parameters": run_id,
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AnswerRequest"}}}},
        "responses": {
            "200": {"description": "the new bridge state", "content": {"application/json": {"schema": bridge}}},
            "400": error_response("malformed JSON or invalid run id"),
            "401": error_response("missing or wrong bearer token"),
            "404": error_response("unknown run id"),
            "409": error_response("run_not_waiting (the bridge run is not waiting_input), run_locked (another request on the run is \
                                   in progress), refused, records_invalid, plan_files_invalid"),
            "413": error_response("body too large"),
            "415": error_response("not application/json"),
            "422": error_response("JSON of the wrong shape (answer missing, unknown field, wrong type), or invalid_answer: \
                                   empty, white space only, or over 2000 bytes"),
            "500": error_response("records_failed: records could not be read or written")
        }
    }});
}
