-- planrun store, schema version 3: every read of a run on the PostgreSQL
-- store checks the run's approval rows against its log
-- (`SELECT … FROM approvals WHERE run_id = $1`), which without this index
-- scans the whole table.
CREATE INDEX approvals_run ON approvals (run_id, approval_id);
