-- Quotas (docs/usage/quotas.md): the rules (`kl quota set|rm`) and the
-- overruns commits recorded (QuotaExceeded). Both are projections of the
-- event log, rebuildable like every read model.

-- One row per glob with a quota.
CREATE TABLE quotas (
  glob            text PRIMARY KEY,
  max_resources   integer NOT NULL,
  soft_resources  integer,
  set_at          timestamptz NOT NULL,
  set_by          text NOT NULL
);

-- One row per version committed over a limit (hard or soft).
CREATE TABLE quota_overruns (
  state_id        uuid NOT NULL,
  state_name      text NOT NULL,
  version         integer NOT NULL,
  glob            text NOT NULL,
  level           text NOT NULL,
  quota_limit     integer NOT NULL,
  resource_count  integer NOT NULL,
  occurred_at     timestamptz NOT NULL,
  actor           text NOT NULL,
  PRIMARY KEY (state_id, version)
);

CREATE INDEX quota_overruns_name ON quota_overruns (state_name, version);

-- Resources a quota counts, per state: the live managed, non-deposed rows.
CREATE INDEX resources_live_counted ON resources (state_id)
  WHERE delete_version IS NULL AND mode = 'managed' AND deposed_key IS NULL;

-- The SQL surface (migration 013): the rules are not per state and every
-- reader may see them; overruns only of the states the reader may read.
DO $$
DECLARE
  live text := current_schema();
BEGIN
  EXECUTE format(
    'CREATE VIEW kl_query.quotas WITH (security_barrier) AS SELECT x.* FROM %I.quotas x',
    live);
  EXECUTE format(
    'CREATE VIEW kl_query.quota_overruns WITH (security_barrier) AS SELECT x.* FROM %I.quota_overruns x
      WHERE EXISTS (SELECT 1 FROM kl_query_grants g
                     WHERE g.pid = pg_backend_pid() AND x.state_name LIKE ANY (g.patterns))',
    live);
END
$$;
GRANT SELECT ON kl_query.quotas, kl_query.quota_overruns TO kl_reader;
