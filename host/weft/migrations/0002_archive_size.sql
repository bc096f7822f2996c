-- Retention (issue 43): how big each archived execution is, and an index
-- for the background job that removes the oldest archived rows
-- (`--archive-ttl`, `--archive-max-rows`). Rows archived before this
-- migration count their size as 0 until they are archived again.
ALTER TABLE executions ADD COLUMN size_bytes BIGINT NOT NULL DEFAULT 0;

CREATE INDEX executions_by_archived ON executions (archived_at, uid);
