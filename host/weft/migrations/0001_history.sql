-- Execution history (issue 43): the events the controller records on
-- every transition, and the archive of finished Workflows.
--
-- One schema for PostgreSQL and SQLite (through sqlx's Any driver): only
-- TEXT, BIGINT and INTEGER columns, JSON kept as TEXT, times as
-- milliseconds since the Unix epoch, `ON CONFLICT DO NOTHING` for
-- idempotent writes.

-- One row per event; its key is the event's deterministic id, so a
-- redelivered event (a crash between the write and its acknowledgement,
-- a database that came back) is written once.
CREATE TABLE events (
    workflow_uid TEXT NOT NULL,
    -- workflow | node | task
    kind TEXT NOT NULL,
    -- '' for a workflow event
    node TEXT NOT NULL,
    -- a task's attempt; a workflow's run (1 + the retries a user asked for)
    attempt INTEGER NOT NULL,
    phase TEXT NOT NULL,
    namespace TEXT NOT NULL,
    workflow TEXT NOT NULL,
    occurred_at BIGINT NOT NULL,
    recorded_at BIGINT NOT NULL,
    reason TEXT,
    message TEXT,
    plugin TEXT,
    plugin_digest TEXT,
    -- apiVersion/kind/name of the child it ran as
    resource TEXT,
    -- JSON: the node's outputs, or their reference in the object store
    outputs TEXT,
    -- JSON: [{name, uri}]
    log_links TEXT,
    PRIMARY KEY (workflow_uid, kind, node, attempt, phase)
);

-- One row per finished Workflow: its final object (spec, status with
-- inputs, outputs, node timeline and artifact references) as JSON, and
-- the columns ListExecutions filters and sorts on.
CREATE TABLE executions (
    uid TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    phase TEXT NOT NULL,
    -- namespace/name of the WorkflowTemplate it was launched from, if any
    template TEXT,
    created_at BIGINT NOT NULL,
    -- the sort key: its start, else its creation
    started_at BIGINT NOT NULL,
    finished_at BIGINT,
    archived_at BIGINT NOT NULL,
    message TEXT,
    -- JSON object
    labels TEXT NOT NULL,
    workflow TEXT NOT NULL
);

CREATE INDEX executions_by_start ON executions (started_at, uid);
CREATE INDEX executions_by_namespace ON executions (namespace, started_at, uid);
CREATE INDEX executions_by_name ON executions (namespace, name);

-- Labels apart, for label selectors that use an index.
CREATE TABLE execution_labels (
    uid TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (uid, key)
);

CREATE INDEX execution_labels_by_pair ON execution_labels (key, value, uid);
