-- planrun store, schema version 1: runs, their plans, history, audit
-- events, idempotency receipts and approvals. Created in the session's
-- current schema (the first of its `search_path`). Applied by
-- `planrun store migrate`, which records this file's SHA-256 in
-- `schema_migrations`: never edit an applied migration, add the next one.
--
-- Every record is kept as the exact text planrun wrote and sealed (the
-- bytes of the file store's `state.json`, `plan.json` and JSON lines), so
-- that seals and hash chains are checked over planrun's own bytes and never
-- over what `jsonb` would give back. Query them with `state::jsonb`.

-- One row per agent run, bridge record or controller record: the sealed
-- checkpoint and the lease on the same row.
CREATE TABLE runs (
    kind text NOT NULL CHECK (kind IN ('agent', 'bridge', 'controller')),
    run_id text NOT NULL CHECK (run_id ~ '^[A-Za-z0-9._-]{1,64}$'),
    -- The workspace the run acts on (today: its absolute path).
    workspace_id text NOT NULL,
    parent_run_id text NULL,
    create_key text NULL,
    -- The checkpoint's `status`; NULL until the first checkpoint.
    status text NULL,
    -- Compare-and-set column: the checkpoint's `state_version`.
    state_version bigint NOT NULL DEFAULT 0 CHECK (state_version >= 0),
    -- The sealed checkpoint envelope, byte for byte the file store's
    -- `state.json`; NULL while the run is being created.
    state text NULL,
    -- The `seq` of the last audit event the checkpoint covers.
    audit_head_seq bigint NOT NULL DEFAULT 0 CHECK (audit_head_seq >= 0),
    history_records bigint NOT NULL DEFAULT 0 CHECK (history_records >= 0),
    -- The lease: who holds the run, the fencing token (one more on every
    -- claim, never reset) and until when (database time only).
    owner_id text NULL,
    lease_version bigint NOT NULL DEFAULT 0 CHECK (lease_version >= 0),
    lease_expires_at timestamptz NULL,
    claims integer NOT NULL DEFAULT 0,
    not_before timestamptz NOT NULL DEFAULT now(),
    cancel_requested_at timestamptz NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz NULL,
    PRIMARY KEY (kind, run_id),
    CHECK ((owner_id IS NULL) = (lease_expires_at IS NULL))
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.01);

CREATE INDEX runs_claim ON runs (workspace_id, created_at) WHERE status IN ('queued', 'running');
CREATE UNIQUE INDEX runs_create_key ON runs (workspace_id, create_key) WHERE create_key IS NOT NULL;
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

-- The plan an agent run executes, written once, with its first checkpoint.
CREATE TABLE run_plans (
    kind text NOT NULL DEFAULT 'agent' CHECK (kind = 'agent'),
    run_id text NOT NULL,
    -- Byte for byte the file store's `plan.json`.
    plan text NOT NULL,
    -- Its link (SHA-256 or HMAC-SHA256), also inside the sealed checkpoint.
    plan_hash text NOT NULL,
    PRIMARY KEY (kind, run_id),
    FOREIGN KEY (kind, run_id) REFERENCES runs (kind, run_id)
);

-- One row per step attempt: the file store's `history.jsonl`.
CREATE TABLE history (
    kind text NOT NULL DEFAULT 'agent' CHECK (kind = 'agent'),
    run_id text NOT NULL,
    record_no bigint NOT NULL CHECK (record_no >= 1),
    -- The JSON line (without its newline); chained into the checkpoint's
    -- `history_hash`.
    line text NOT NULL,
    state_version bigint NOT NULL,
    lease_version bigint NOT NULL,
    PRIMARY KEY (kind, run_id, record_no),
    FOREIGN KEY (kind, run_id) REFERENCES runs (kind, run_id)
);

-- One row per event: the file store's `audit.jsonl`, hash-chained.
CREATE TABLE audit_events (
    kind text NOT NULL,
    run_id text NOT NULL,
    seq bigint NOT NULL CHECK (seq >= 1),
    -- The JSON line (without its newline); it carries `seq` and `prev_hash`.
    line text NOT NULL,
    -- The link of `line`, which the next event names as its `prev_hash`.
    hash text NOT NULL,
    state_version bigint NOT NULL,
    lease_version bigint NOT NULL,
    PRIMARY KEY (kind, run_id, seq),
    FOREIGN KEY (kind, run_id) REFERENCES runs (kind, run_id)
);

-- The second guard of the append-only tables (the first: grant the
-- application role INSERT and SELECT only).
CREATE FUNCTION planrun_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'planrun: % is append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION planrun_append_only();
CREATE TRIGGER history_append_only BEFORE UPDATE OR DELETE ON history
    FOR EACH ROW EXECUTE FUNCTION planrun_append_only();

-- Idempotency receipts, per workspace: the file store's
-- `.planrun/receipts/<sha256 of key>.json`.
CREATE TABLE receipts (
    workspace_id text NOT NULL,
    key_sha256 text NOT NULL,
    idem_key text NOT NULL,
    status text NOT NULL CHECK (status IN ('started', 'done')),
    run_id text NOT NULL,
    step_id text NOT NULL,
    -- Byte for byte the file store's receipt file.
    receipt text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, key_sha256)
);
CREATE INDEX receipts_run ON receipts (run_id);

-- Human decisions on a frozen action. Created with the schema; written once
-- approvals are consumed across nodes (the worker part).
CREATE TABLE approvals (
    approval_id bigserial PRIMARY KEY,
    run_id text NOT NULL,
    step_id text NOT NULL,
    fingerprint text NOT NULL,
    state_version bigint NOT NULL,
    scope text NOT NULL,
    decision text NOT NULL CHECK (decision IN ('approved', 'rejected')),
    decided_by text NULL,
    decided_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NULL,
    reason text NULL,
    consumed_at timestamptz NULL,
    consumed_lease bigint NULL,
    consumed_seq bigint NULL
);
CREATE UNIQUE INDEX approvals_live ON approvals (run_id, state_version)
    WHERE decision = 'approved' AND consumed_at IS NULL;
CREATE UNIQUE INDEX approvals_consumed ON approvals (run_id, state_version)
    WHERE consumed_at IS NOT NULL;
