-- Dependency edges between resource addresses (not instance rows), alive
-- now: a walk over the graph (scope expansion, blast radius) reads one row
-- per resource it steps through, however many instances each resource has.
-- 20,000 instances depending on one resource are one edge here.

-- One row per (dependent resource, resource it names) with at least one
-- live instance declaring it; `instances` counts those instances.
CREATE TABLE resource_edges (
  state_id               uuid NOT NULL,
  from_resource_address  text NOT NULL,
  to_address             text NOT NULL,
  instances              integer NOT NULL,
  PRIMARY KEY (state_id, from_resource_address, to_address)
);

CREATE INDEX resource_edges_to ON resource_edges (state_id, to_address)
  INCLUDE (from_resource_address);

-- What each instance address declares in its newest lifecycle, so that a
-- LifecycleClosed (which names only the address) takes the right edges
-- away. `dependencies` is NULL once the address is closed; `version` is the
-- version of the newest open or close applied, which makes a redelivered
-- event a no-op.
CREATE TABLE resource_edge_sources (
  state_id               uuid NOT NULL,
  address                text NOT NULL,
  version                integer NOT NULL,
  from_resource_address  text NOT NULL,
  dependencies           text[],
  PRIMARY KEY (state_id, address)
);

-- Existing databases: both tables from the lifecycles already projected,
-- and the new projector's checkpoint (and skips) where the lifecycles
-- projector's are, so it continues from there instead of replaying the log.
INSERT INTO resource_edge_sources (state_id, address, version, from_resource_address, dependencies)
SELECT DISTINCT ON (r.state_id, r.address)
       r.state_id, r.address,
       CASE WHEN r.delete_version IS NULL THEN r.create_version ELSE r.delete_version END,
       r.resource_address,
       CASE WHEN r.delete_version IS NULL THEN
         ARRAY(SELECT DISTINCT d COLLATE "C" FROM jsonb_array_elements_text(
                 CASE WHEN jsonb_typeof(r.dependencies) = 'array' THEN r.dependencies
                      ELSE '[]'::jsonb END) AS d ORDER BY 1)
       END
  FROM resources r
 -- as the projector: an address has a row once a lifecycle of it declared a dependency
 WHERE EXISTS (SELECT 1 FROM resources o
                WHERE o.state_id = r.state_id AND o.address = r.address
                  AND jsonb_typeof(o.dependencies) = 'array'
                  AND jsonb_array_length(o.dependencies) > 0)
 ORDER BY r.state_id, r.address, r.delete_version IS NULL DESC, r.create_version DESC;

INSERT INTO resource_edges (state_id, from_resource_address, to_address, instances)
SELECT s.state_id, s.from_resource_address, d, count(*)
  FROM resource_edge_sources s, unnest(s.dependencies) AS d
 GROUP BY 1, 2, 3;

INSERT INTO kl_checkpoints (projection, transaction_id, global_position)
SELECT 'state-resource-edges', transaction_id, global_position
  FROM kl_checkpoints WHERE projection = 'state-resource-lifecycles';
INSERT INTO kl_projection_skips (projection, global_position, reason)
SELECT 'state-resource-edges', global_position, reason
  FROM kl_projection_skips WHERE projection = 'state-resource-lifecycles';

-- The SQL surface (docs/sql.md): filtered views as for every read model,
-- and blast_radius(), a breadth-first walk over resource_edges.
DO $$
DECLARE
  live text := current_schema();
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['resource_edges', 'resource_edge_sources'] LOOP
    EXECUTE format($v$
      CREATE VIEW kl_query.%2$I WITH (security_barrier) AS
      SELECT x.* FROM %1$I.%2$I x
       WHERE EXISTS (SELECT 1 FROM %1$I.states s JOIN kl_query_grants g ON g.pid = pg_backend_pid()
                      WHERE s.state_id = x.state_id AND s.name LIKE ANY (g.patterns))$v$, live, t);
  END LOOP;
END
$$;
GRANT SELECT ON kl_query.resource_edges, kl_query.resource_edge_sources TO kl_reader;

-- Every resource that depends on resource `address` in the live state
-- `state_name`, directly or through others ('dependents'), or that it
-- depends on ('dependencies'), each with its depth (1 = direct) and the
-- least resource of the level before that it was reached through. Breadth
-- first, one index lookup of resource_edges per level, over the filtered
-- views (a kl_reader sees only the states its token may read).
CREATE FUNCTION kl_query.blast_radius(state_name text, address text,
                                      direction text DEFAULT 'dependents')
RETURNS TABLE (resource_address text, depth integer, via text)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
  sid uuid;
  level integer := 0;
  frontier text[] := ARRAY[blast_radius.address];
  seen text[] := ARRAY[blast_radius.address];
  nexts text[];
  vias text[];
BEGIN
  IF direction IS NULL OR direction NOT IN ('dependents', 'dependencies') THEN
    RAISE EXCEPTION 'blast_radius: direction must be ''dependents'' or ''dependencies'', not %',
      coalesce(direction, 'NULL');
  END IF;
  SELECT s.state_id INTO sid FROM kl_query.states s
   WHERE s.name = blast_radius.state_name AND s.deleted_at IS NULL;
  IF sid IS NULL OR blast_radius.address IS NULL THEN RETURN; END IF;
  LOOP
    level := level + 1;
    IF direction = 'dependents' THEN
      SELECT coalesce(array_agg(n.a ORDER BY n.a), '{}'), coalesce(array_agg(n.v ORDER BY n.a), '{}')
        INTO nexts, vias
        FROM (SELECT e.from_resource_address AS a, min(e.to_address) AS v
                FROM kl_query.resource_edges e
               WHERE e.state_id = sid AND e.to_address = ANY (frontier)
                 AND e.from_resource_address <> ALL (seen)
               GROUP BY 1) n;
    ELSE
      SELECT coalesce(array_agg(n.a ORDER BY n.a), '{}'), coalesce(array_agg(n.v ORDER BY n.a), '{}')
        INTO nexts, vias
        FROM (SELECT e.to_address AS a, min(e.from_resource_address) AS v
                FROM kl_query.resource_edges e
               WHERE e.state_id = sid AND e.from_resource_address = ANY (frontier)
                 AND e.to_address <> ALL (seen)
               GROUP BY 1) n;
    END IF;
    EXIT WHEN cardinality(nexts) = 0;
    RETURN QUERY SELECT u.a, level, u.v FROM unnest(nexts, vias) AS u(a, v);
    seen := seen || nexts;
    frontier := nexts;
  END LOOP;
END
$$;
GRANT EXECUTE ON FUNCTION kl_query.blast_radius(text, text, text) TO kl_reader;
