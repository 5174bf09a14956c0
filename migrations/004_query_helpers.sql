-- SQL helpers for `kl query` (docs/sql.md): a state as of a terraform serial,
-- and a window onto the event log itself.

-- The instances alive at the newest version that carried `serial` (serials
-- may repeat; the newest such version is what GET ?serial=N serves).
CREATE FUNCTION resources_at(state_name text, serial bigint)
RETURNS SETOF resources
LANGUAGE sql STABLE
AS $$
  SELECT r.*
    FROM resources r
    JOIN (SELECT sv.state_id, max(sv.version) AS version
            FROM state_versions sv
            JOIN states s ON s.state_id = sv.state_id
           WHERE s.name = resources_at.state_name
             AND s.deleted_at IS NULL
             AND sv.serial = resources_at.serial
           GROUP BY sv.state_id) v ON v.state_id = r.state_id
   WHERE r.create_version <= v.version
     AND (r.delete_version IS NULL OR r.delete_version > v.version)
$$;

-- The history itself. kl_reader may not read kl_events; this view runs with
-- its owner's rights, which is the point: it is the documented window onto
-- the log, exposing event payloads but not the store's bookkeeping columns.
CREATE VIEW event_log AS
SELECT e.global_position AS position,
       e.stream_id AS stream,
       e.type,
       e.metadata->>'actor' AS actor,
       (e.metadata->>'occurredAt')::timestamptz AS occurred_at,
       e.data
  FROM kl_events e;

GRANT SELECT ON event_log TO kl_reader;
GRANT EXECUTE ON FUNCTION resources_at(text, bigint) TO kl_reader;
