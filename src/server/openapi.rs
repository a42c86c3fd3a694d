//! The OpenAPI 3.1 document served at `GET /openapi.json`. Written by hand
//! next to the handlers; `tests/server.rs` checks that every route is in it.

use serde_json::{Value, json};

pub fn document() -> Value {
    let error = json!({"$ref": "#/components/schemas/Error"});
    let error_response =
        |description: &str| json!({"description": description, "content": {"application/json": {"schema": error}}});
    let bridge = json!({"$ref": "#/components/schemas/BridgeRun"});
    let controller = json!({"$ref": "#/components/schemas/ControllerRun"});
    let run_id = json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$"}}]);
    let nullable = |kind: &str| json!({"type": [kind, "null"]});
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "planrun service",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Bridge runs (one goal through one adapter) and controller runs (a bounded decide → run loop). \
                            When PLANRUN_API_TOKEN is set, every endpoint but GET /health needs `Authorization: Bearer <token>`."
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
                        "code": {"type": "string"}, "message": {"type": "string"}}}}
                },
                "RunRequest": {
                    "type": "object", "additionalProperties": false, "required": ["goal"],
                    "properties": {
                        "goal": {"type": "string", "minLength": 1},
                        "adapter": {"type": "string", "default": "agent",
                                    "enum": ["stub", "local_echo", "agent", "openai", "ollama", "cloudcode"]}
                    }
                },
                "ControllerRequest": {
                    "type": "object", "additionalProperties": false, "required": ["goal"],
                    "properties": {"goal": {"type": "string", "minLength": 1}}
                },
                "BridgeRun": {
                    "type": "object",
                    "properties": {
                        "run_id": {"type": "string"},
                        "goal": {"type": "string"},
                        "status": {"type": "string", "enum": ["created", "running", "done", "failed"]},
                        "adapter": {"type": "string"},
                        "adapter_mode": {"type": "string", "enum": ["real", "stub", "unavailable"]},
                        "instruction": {"type": "string"},
                        "response": nullable("string"),
                        "error": nullable("string"),
                        "exit_code": nullable("integer"),
                        "agent_run_id": nullable("string"),
                        "agent_final_status": nullable("string"),
                        "agent_state_path": nullable("string"),
                        "controller_run_id": {"type": "string"},
                        "created_at": {"type": "string", "format": "date-time"},
                        "updated_at": {"type": "string", "format": "date-time"}
                    }
                },
                "Decision": {
                    "type": "object",
                    "properties": {
                        "iteration": {"type": "integer"},
                        "action": {"type": "string", "enum": ["run_agent", "stop"]},
                        "goal": {"type": "string", "maxLength": 500},
                        "reason": {"type": "string"},
                        "mode": {"type": "string", "enum": ["stub", "ollama", "ollama-fallback", "openai", "openai-fallback"]},
                        "parsed_success": {"type": "boolean"},
                        "fallback_used": {"type": "boolean"},
                        "fallback_reason": nullable("string")
                    }
                },
                "ControllerRun": {
                    "type": "object",
                    "properties": {
                        "controller_run_id": {"type": "string"},
                        "goal": {"type": "string"},
                        "current_goal": {"type": "string"},
                        "status": {"type": "string", "enum": ["running", "done", "failed"]},
                        "final_status": {"type": ["string", "null"], "enum": ["done", "failed", null]},
                        "stop_reason": {"type": ["string", "null"], "enum": ["decision_stop", "max_iterations", "consecutive_failures", "prompt_blocked", null]},
                        "decision_mode": {"type": "string", "enum": ["stub", "ollama", "openai"]},
                        "decision_model": nullable("string"),
                        "max_iterations": {"type": "integer"},
                        "max_consecutive_failures": {"type": "integer"},
                        "iterations": {"type": "integer"},
                        "consecutive_failures": {"type": "integer"},
                        "recovery_attempted": {"type": "boolean"},
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
                        "ollama_model": {"type": "string"},
                        "auth_required": {"type": "boolean"}
                    }
                }
            }
        },
        "security": [{"bearer": []}],
        "paths": {
            "/health": {"get": {
                "summary": "Service status, adapter modes and the decision backend (never needs a token)",
                "security": [],
                "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}}
            }},
            "/runs": {"post": {
                "summary": "Run a goal through an adapter to its end (status done or failed)",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunRequest"}}}},
                "responses": {
                    "201": {"description": "the final bridge state", "content": {"application/json": {"schema": bridge}}},
                    "400": error_response("malformed JSON, empty goal or unknown adapter"),
                    "401": error_response("missing or wrong bearer token"),
                    "413": error_response("body too large"),
                    "415": error_response("not application/json"),
                    "422": error_response("JSON of the wrong shape")
                }
            }},
            "/runs/{id}": {"get": {
                "summary": "A bridge run's persisted state",
                "parameters": run_id,
                "responses": {
                    "200": {"description": "the bridge state", "content": {"application/json": {"schema": bridge}}},
                    "400": error_response("invalid run id"),
                    "401": error_response("missing or wrong bearer token"),
                    "404": error_response("unknown run id")
                }
            }},
            "/controller/runs": {"post": {
                "summary": "Run the controller loop for a goal to its end",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ControllerRequest"}}}},
                "responses": {
                    "201": {"description": "the final controller state", "content": {"application/json": {"schema": controller}}},
                    "400": error_response("malformed JSON or empty goal"),
                    "401": error_response("missing or wrong bearer token"),
                    "422": error_response("JSON of the wrong shape")
                }
            }},
            "/controller/runs/{id}": {"get": {
                "summary": "A controller run's persisted state",
                "parameters": run_id,
                "responses": {
                    "200": {"description": "the controller state", "content": {"application/json": {"schema": controller}}},
                    "400": error_response("invalid run id"),
                    "401": error_response("missing or wrong bearer token"),
                    "404": error_response("unknown run id")
                }
            }},
            "/openapi.json": {"get": {
                "summary": "This document",
                "responses": {"200": {"description": "OpenAPI 3.1"}}
            }}
        }
    })
}
