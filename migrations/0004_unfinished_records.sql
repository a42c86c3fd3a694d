-- planrun store, schema version 4: the service's scan lists the bridge
-- records of its workspace that have not ended (`created`, `queued`,
-- `running`) and nobody holds, at start-up and every few seconds; without
-- this index that scans every record of every workspace.
CREATE INDEX runs_unfinished ON runs (workspace_id, kind, created_at) WHERE status IN ('created', 'queued', 'running');
