-- planrun store, schema version 2: queued runs, and the workspace id.
--
-- A queued run (`planrun --plan FILE --queue`, `POST /runs` with
-- `"wait": false`) is a `runs` row with status `queued`, no checkpoint
-- (`state` NULL), held by nobody, and the request it was submitted with:
-- a JSON document (the plan and policy files' paths and text, the goal)
-- from which a worker on any machine that mounts the workspace starts it
-- exactly as `planrun --plan FILE` would. A worker claims the oldest one
-- (`FOR UPDATE SKIP LOCKED`, a new fencing token); its first checkpoint
-- makes it `running`. A claimer that dies before that checkpoint leaves
-- the row `queued`, and it is claimed again once the lease expires.
ALTER TABLE runs ADD COLUMN request text NULL;
-- (A bridge record has a `queued` status of its own: `POST /runs` with
-- `"wait": false`; it has a checkpoint and no request.)
ALTER TABLE runs ADD CONSTRAINT runs_queued_request
    CHECK (kind <> 'agent' OR status IS DISTINCT FROM 'queued' OR request IS NOT NULL);

COMMENT ON COLUMN runs.request IS
    'The request a queued run was submitted with (JSON text); NULL for a run started directly.';
-- From this version on the workspace is named by `<workspace>/.planrun/id`
-- (created on first use), no longer by its absolute path.
COMMENT ON COLUMN runs.workspace_id IS
    'The id in <workspace>/.planrun/id of the workspace the run acts on.';
COMMENT ON COLUMN receipts.workspace_id IS
    'The id in <workspace>/.planrun/id of the workspace the receipt belongs to.';
