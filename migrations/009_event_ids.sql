-- Every event gets an id and the version of the shape of its data.
--
-- The id is the writer's (the application picks a uuid per event), never a
-- database default: a writer that retries an append sends the same ids, and
-- the store recognises the repeat instead of storing the events twice.
-- Subscribers deduplicate on it. The schema version lets a reader upcast an
-- older shape of a type's data.
--
-- Events stored before this migration get a generated id and version 1. The
-- volatile default fills every existing row in the one rewrite this ALTER
-- does; both defaults are dropped right after, so new rows must say.
ALTER TABLE kl_events
  ADD COLUMN event_id uuid NOT NULL DEFAULT gen_random_uuid(),
  ADD COLUMN schema_version integer NOT NULL DEFAULT 1 CHECK (schema_version >= 1);
ALTER TABLE kl_events
  ALTER COLUMN event_id DROP DEFAULT,
  ALTER COLUMN schema_version DROP DEFAULT;

CREATE UNIQUE INDEX kl_events_event_id ON kl_events (event_id);

-- The documented window onto the log (migration 004) shows both. New columns
-- go last: CREATE OR REPLACE VIEW keeps the view, its grants and its users.
CREATE OR REPLACE VIEW event_log AS
SELECT e.global_position AS position,
       e.stream_id AS stream,
       e.type,
       e.metadata->>'actor' AS actor,
       (e.metadata->>'occurredAt')::timestamptz AS occurred_at,
       e.data,
       e.event_id,
       e.schema_version
  FROM kl_events e;
