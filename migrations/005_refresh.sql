-- Refresh (ADR 0005/0006): runs and their per-instance results, provider
-- configs, the provider schema cache, and the drift view (docs/sql.md).
-- refresh_runs, refresh_results and provider_configs are projections of the
-- event log (streams refresh-<run_id> and provider-configs-<state name>);
-- provider_schemas is a plain cache, never rebuilt.

-- One row per refresh run. Counts follow the results as they arrive.
CREATE TABLE refresh_runs (
  run_id         uuid PRIMARY KEY,
  state_id       uuid NOT NULL,
  state_name     text NOT NULL,
  from_version   integer NOT NULL,
  from_serial    bigint NOT NULL,
  to_version     integer,
  to_serial      bigint,
  checked        integer NOT NULL DEFAULT 0,
  changed        integer NOT NULL DEFAULT 0,
  failed         integer NOT NULL DEFAULT 0,
  status         text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'cancelled')),
  error_summary  text,
  actor          text NOT NULL,
  dry_run        boolean NOT NULL,
  started_at     timestamptz NOT NULL,
  finished_at    timestamptz
);

CREATE INDEX refresh_runs_state_name ON refresh_runs (state_name, started_at DESC);
CREATE INDEX refresh_runs_to_version ON refresh_runs (state_id, to_version)
  WHERE to_version IS NOT NULL;

-- The latest result per instance of a run.
CREATE TABLE refresh_results (
  run_id         uuid NOT NULL,
  state_id       uuid NOT NULL,
  address        text NOT NULL,
  provider       text NOT NULL,
  outcome        text NOT NULL CHECK (outcome IN ('unchanged', 'drifted', 'gone', 'failed')),
  before_hash    text NOT NULL,
  after_hash     text,
  changed_paths  jsonb NOT NULL,
  error          text,
  PRIMARY KEY (run_id, address)
);

-- Provider configuration per state name, stored exactly as given: secrets
-- are {"env": "NAME"} references, resolved where the provider runs.
CREATE TABLE provider_configs (
  state_name  text NOT NULL,
  source      text NOT NULL,
  alias       text NOT NULL,  -- '' for the default configuration
  config      jsonb NOT NULL,
  updated_at  timestamptz NOT NULL,
  updated_by  text NOT NULL,
  PRIMARY KEY (state_name, source, alias)
);

-- GetProviderSchema answers, by normalised source and exact version. json,
-- not jsonb: the AWS provider's schema is megabytes and only ever read whole.
CREATE TABLE provider_schemas (
  source      text NOT NULL,
  version     text NOT NULL,
  schema      json NOT NULL,
  fetched_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (source, version)
);

-- Instances whose current lifecycle was opened by a refresh that replaced an
-- earlier lifecycle of the same address (the cloud disagreed with the
-- recorded state), as long as no later version came from anything but a
-- refresh: terraform's own write (http), apply, import, state-engine or
-- rollback means someone has acted since, and clears the signal even when it
-- wrote the refreshed value back unchanged.
CREATE VIEW current_resource_drift AS
SELECT s.name AS state_name,
       r.state_id,
       r.address,
       r.type,
       r.provider,
       p.attributes AS previous_attributes,
       r.attributes AS current_attributes,
       coalesce(res.changed_paths, (
         -- Without the run's own result (e.g. it was never finished), name the
         -- top-level attributes that differ.
         SELECT coalesce(jsonb_agg(k ORDER BY k), '[]'::jsonb)
           FROM (SELECT jsonb_object_keys(CASE jsonb_typeof(p.attributes)
                          WHEN 'object' THEN p.attributes ELSE '{}' END) AS k
                 UNION
                 SELECT jsonb_object_keys(CASE jsonb_typeof(r.attributes)
                          WHEN 'object' THEN r.attributes ELSE '{}' END)) keys
          WHERE p.attributes -> k IS DISTINCT FROM r.attributes -> k
       )) AS changed_paths,
       r.create_serial AS detected_serial,
       r.create_version AS detected_version,
       run.run_id AS refresh_run_id
  FROM resources r
  JOIN states s ON s.state_id = r.state_id AND s.deleted_at IS NULL
  JOIN state_versions v
    ON v.state_id = r.state_id AND v.version = r.create_version AND v.source = 'refresh'
  JOIN resources p
    ON p.state_id = r.state_id AND p.address = r.address AND p.delete_version = r.create_version
  LEFT JOIN refresh_runs run ON run.state_id = r.state_id AND run.to_version = r.create_version
  LEFT JOIN refresh_results res ON res.run_id = run.run_id AND res.address = r.address
 WHERE r.delete_version IS NULL
   AND NOT EXISTS (SELECT 1 FROM state_versions later
                    WHERE later.state_id = r.state_id
                      AND later.version > r.create_version
                      AND later.source <> 'refresh');

-- The query role (migration 003) may not exist where this runs first.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'kl_reader') THEN
    GRANT SELECT ON refresh_runs, refresh_results, provider_configs, provider_schemas,
      current_resource_drift TO kl_reader;
  END IF;
END
$$;
