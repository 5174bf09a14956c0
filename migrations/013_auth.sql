-- Authentication and authorization (docs/security.md).

-- Tokens, projected from TokenCreated/TokenRevoked. Only the SHA-256 of a
-- secret is ever stored; a certificate identity has its subject instead.
-- Not granted to kl_reader: the SQL surface never shows tokens.
CREATE TABLE auth_tokens (
  name          text PRIMARY KEY,
  token_id      uuid NOT NULL,
  prefix        text,
  secret_hash   text,
  cert_subject  text,
  scopes        text[] NOT NULL,
  expires_at    timestamptz,
  created_at    timestamptz NOT NULL,
  created_by    text NOT NULL,
  revoked_at    timestamptz,
  revoked_by    text
);

CREATE UNIQUE INDEX auth_tokens_secret_hash ON auth_tokens (secret_hash);
CREATE INDEX auth_tokens_cert_subject ON auth_tokens (cert_subject) WHERE revoked_at IS NULL;

-- When each token was last used: written by kld as requests arrive (at most
-- once a minute per token), not from events, so no rebuild touches it.
CREATE TABLE auth_token_usage (
  token_id      uuid PRIMARY KEY,
  last_used_at  timestamptz NOT NULL
);

-- SQL surface isolation (POST /v1/query). kl_reader reads only the views of
-- schema kl_query, each the read model of the same name with the rows of
-- the states the request's token may read. Which states those are is in
-- kl_query_grants under the reader connection's backend pid: kld writes the
-- row (as owner) just before it runs a query on that connection and deletes
-- it after. The reader can write no table and cannot change its pid, so no
-- SQL it sends (SET, set_config, RESET, SET ROLE, CTEs, functions) widens
-- what it sees; without a row it sees nothing.
CREATE TABLE kl_query_grants (
  pid          integer PRIMARY KEY,
  -- LIKE patterns of readable state names (escape \)
  patterns     text[] NOT NULL,
  -- event_log rows of streams that belong to no state (authentication off)
  all_streams  boolean NOT NULL
);

CREATE SCHEMA kl_query;

DO $$
DECLARE
  v record;
  live text := current_schema();
  by_name text := 'EXISTS (SELECT 1 FROM kl_query_grants g WHERE g.pid = pg_backend_pid() AND %s LIKE ANY (g.patterns))';
  by_id text := 'EXISTS (SELECT 1 FROM states s JOIN kl_query_grants g ON g.pid = pg_backend_pid() WHERE s.state_id = x.state_id AND s.name LIKE ANY (g.patterns))';
BEGIN
  -- Every read model the SQL surface documents, with the column naming its
  -- state (NULL: keyed by state_id; '' : not per state). Tables of later
  -- features are included when they exist here.
  FOR v IN SELECT * FROM (VALUES
      ('states', 'x.name'),
      ('state_versions', NULL),
      ('resources', NULL),
      ('current_resources', 'x.state_name'),
      ('resource_dependencies', NULL),
      ('outputs', NULL),
      ('state_locks', 'x.name'),
      ('raw_state', 'x.name'),
      ('refresh_runs', 'x.state_name'),
      ('refresh_results', NULL),
      ('provider_configs', 'x.state_name'),
      ('provider_schemas', ''),
      ('current_resource_drift', 'x.state_name'),
      ('resource_reservations', 'x.state_name'),
      ('apply_runs', 'x.state_name')
    ) AS t(name, state_column)
  LOOP
    CONTINUE WHEN to_regclass(format('%I.%I', live, v.name)) IS NULL;
    EXECUTE format(
      'CREATE VIEW kl_query.%I WITH (security_barrier) AS SELECT x.* FROM %I.%I x WHERE %s',
      v.name, live, v.name,
      CASE WHEN v.state_column = '' THEN 'true'
           WHEN v.state_column IS NULL THEN by_id
           ELSE format(by_name, v.state_column) END);
  END LOOP;

  -- The log: events of readable states' streams; streams of no state (runs
  -- of other kinds) only with authentication off; token streams never.
  EXECUTE format($v$
    CREATE VIEW kl_query.event_log WITH (security_barrier) AS
    SELECT x.* FROM %I.event_log x
     WHERE x.stream NOT LIKE 'token-%%'
       AND EXISTS (
         SELECT 1 FROM kl_query_grants g
          WHERE g.pid = pg_backend_pid()
            AND CASE
                  WHEN x.stream LIKE 'state-%%' THEN substr(x.stream, 7) LIKE ANY (g.patterns)
                  WHEN x.stream LIKE 'provider-configs-%%' THEN substr(x.stream, 18) LIKE ANY (g.patterns)
                  WHEN x.stream LIKE 'refresh-%%' THEN EXISTS (
                    SELECT 1 FROM refresh_runs r
                     WHERE 'refresh-' || r.run_id::text = x.stream
                       AND r.state_name LIKE ANY (g.patterns))
                  WHEN x.stream LIKE 'apply-%%' THEN EXISTS (
                    SELECT 1 FROM apply_runs a
                     WHERE 'apply-' || a.run_id = x.stream
                       AND a.state_name LIKE ANY (g.patterns))
                  ELSE g.all_streams
                END)$v$, live);
END
$$;

-- As in migration 004, over the filtered views. (Migration 004's own
-- resources_at reads `resources` by search_path as its caller: for
-- kl_reader the filtered view, or, with the path changed, nothing.)
CREATE FUNCTION kl_query.resources_at(state_name text, serial bigint)
RETURNS SETOF kl_query.resources
LANGUAGE sql STABLE
AS $$
  SELECT r.*
    FROM kl_query.resources r
    JOIN (SELECT sv.state_id, max(sv.version) AS version
            FROM kl_query.state_versions sv
            JOIN kl_query.states s ON s.state_id = sv.state_id
           WHERE s.name = resources_at.state_name
             AND s.deleted_at IS NULL
             AND sv.serial = resources_at.serial
           GROUP BY sv.state_id) v ON v.state_id = r.state_id
   WHERE r.create_version <= v.version
     AND (r.delete_version IS NULL OR r.delete_version > v.version)
$$;

DO $$
BEGIN
  EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM kl_reader', current_schema());
  EXECUTE format('ALTER ROLE kl_reader IN DATABASE %I SET search_path = kl_query, public', current_database());
END
$$;
GRANT USAGE ON SCHEMA kl_query TO kl_reader;
GRANT SELECT ON ALL TABLES IN SCHEMA kl_query TO kl_reader;
GRANT EXECUTE ON FUNCTION kl_query.resources_at(text, bigint) TO kl_reader;
