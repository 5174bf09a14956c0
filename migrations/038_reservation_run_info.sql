-- A run's info once per run (docs/performance-history.md, "A run's info, once (wave
-- 19)"). resource_reservations held the run's whole `info` on each of its
-- rows, one per glob: a run reserving N globs stored it N times. The rows
-- move to reservation_holders, where an apply run's row has no info (a
-- terraform lock's keeps its LockInfo), and the run's info is one row of
-- reservation_run_info. resource_reservations becomes a view with the
-- table's columns, types and meaning: `info` is still on every row.

DROP VIEW kl_query.resource_reservations;
ALTER TABLE resource_reservations RENAME TO reservation_holders;
ALTER INDEX resource_reservations_pkey RENAME TO reservation_holders_pkey;
ALTER INDEX resource_reservations_name RENAME TO reservation_holders_name;
ALTER INDEX resource_reservations_run RENAME TO reservation_holders_run;
ALTER TABLE reservation_holders ALTER COLUMN info DROP NOT NULL;

-- runs holding reservations: the info their start carried
CREATE TABLE reservation_run_info (
  state_id  uuid NOT NULL,
  run_id    text NOT NULL,
  info      jsonb NOT NULL,
  PRIMARY KEY (state_id, run_id)
);

INSERT INTO reservation_run_info (state_id, run_id, info)
SELECT DISTINCT ON (state_id, run_id) state_id, run_id, info
  FROM reservation_holders
 WHERE kind = 'apply'
 ORDER BY state_id, run_id, acquired_at, id;
UPDATE reservation_holders SET info = NULL WHERE kind = 'apply';
ALTER TABLE reservation_holders
  ADD CONSTRAINT reservation_holders_info CHECK ((kind = 'apply') = (info IS NULL));

-- A lookup by run needs no index of its own: the key of reservation_run_info.
CREATE VIEW resource_reservations AS
SELECT h.state_id, h.state_name, h.id, h.kind, h.run_id, h.address_glob, h.mode, h.holder,
       coalesce(h.info, i.info) AS info, h.acquired_at, h.expires_at
  FROM reservation_holders h
  LEFT JOIN reservation_run_info i
    ON h.kind = 'apply' AND i.state_id = h.state_id AND i.run_id = h.run_id;

-- The SQL surface (migration 013): the rows of the states the request's
-- token may read, by state name as before.
DO $$
DECLARE
  live text := current_schema();
BEGIN
  EXECUTE format($v$
    CREATE VIEW kl_query.resource_reservations WITH (security_barrier) AS
    SELECT x.* FROM %1$I.resource_reservations x
     WHERE EXISTS (SELECT 1 FROM kl_query_grants g
                    WHERE g.pid = pg_backend_pid() AND x.state_name LIKE ANY (g.patterns))$v$,
    live);
END
$$;
GRANT SELECT ON kl_query.resource_reservations TO kl_reader;
