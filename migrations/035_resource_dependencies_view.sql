-- resource_dependencies becomes a view over `resources`, whose `dependencies`
-- column already holds every edge a lifecycle declares. The table was a
-- second copy of them, written by its own projector: a first commit of
-- 20,000 instances was 60,000 more rows (and their key and index entries) to
-- COPY, about as much of PostgreSQL's time as the 20,000 lifecycles
-- themselves (docs/performance.md, "`resource_dependencies` as a view
-- (wave 13)"). The view has the table's columns, types and meaning: one row
-- per distinct target a lifecycle names, living exactly as long as that
-- lifecycle (the projector closed an edge with the same version and serial
-- as its lifecycle). `dependencies` is a JSON array of strings or absent
-- (the parser rejects anything else); a NULL or any other value declares no
-- edge, and only string elements are targets.
--
-- Lookups by target go through resource_edges (which resources depend on a
-- resource) and then `resources` by resource address: the view itself has
-- no index on `to_address`.

-- The live instances of a resource in address order, so that "the first
-- dependents of X by address" reads a page of each dependent resource
-- instead of every instance of it (the dashboard; 20,000 instances of one
-- resource depending on X were 20,000 `dependencies` to read and sort).
-- The address was already carried (INCLUDE); as a key column it costs the
-- index nothing more to hold.
DROP INDEX resources_live_by_resource;
CREATE INDEX resources_live_by_resource ON resources (state_id, resource_address, address)
  WHERE delete_version IS NULL;

DROP VIEW kl_query.resource_dependencies;
DROP TABLE resource_dependencies;

-- The projector state-resource-dependencies is gone: its checkpoint and skips
-- with it (migration 034 made them).
DELETE FROM kl_checkpoints WHERE projection = 'state-resource-dependencies';
DELETE FROM kl_projection_skips WHERE projection = 'state-resource-dependencies';

CREATE VIEW resource_dependencies AS
SELECT r.state_id,
       r.address AS from_address,
       r.resource_address AS from_resource_address,
       d.to_address,
       r.create_version,
       r.delete_version,
       r.create_serial,
       r.delete_serial
  FROM resources r
 CROSS JOIN LATERAL (
   SELECT DISTINCT e #>> '{}'
     FROM jsonb_array_elements(
            CASE WHEN jsonb_typeof(r.dependencies) = 'array' THEN r.dependencies END) AS e
    WHERE jsonb_typeof(e) = 'string'
 ) AS d(to_address);

-- The SQL surface (migration 013): the rows of the states the request's
-- token may read, as for every read model keyed by state_id.
DO $$
DECLARE
  live text := current_schema();
BEGIN
  EXECUTE format($v$
    CREATE VIEW kl_query.resource_dependencies WITH (security_barrier) AS
    SELECT x.* FROM %1$I.resource_dependencies x
     WHERE EXISTS (SELECT 1 FROM %1$I.states s JOIN kl_query_grants g ON g.pid = pg_backend_pid()
                    WHERE s.state_id = x.state_id AND s.name LIKE ANY (g.patterns))$v$, live);
END
$$;
GRANT SELECT ON kl_query.resource_dependencies TO kl_reader;
