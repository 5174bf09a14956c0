-- The role `kl query` and POST /v1/query run as. kld logs in as it on a pool
-- of its own (never SET ROLE on the owner's connection: user SQL can RESET
-- ROLE or set_config('role', ...) its way back to the owner). Its password is
-- set by kld at start; PostgreSQL, not kld, decides what it may read.
--
-- Roles are cluster-wide and several databases may share one server (and
-- migrate at the same time), so creation tolerates a concurrent twin and
-- everything else here is per database.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'kl_reader') THEN
    BEGIN
      CREATE ROLE kl_reader LOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;
    EXCEPTION
      WHEN duplicate_object OR unique_violation THEN NULL; -- another database's migration won
      WHEN insufficient_privilege THEN
        RAISE EXCEPTION 'cannot create role kl_reader: %', SQLERRM
          USING HINT = 'grant CREATEROLE to the user in KL_DATABASE_URL, or have a DBA run: CREATE ROLE kl_reader LOGIN NOINHERIT';
    END;
  END IF;

  -- Backstops for a session that somehow escapes kld's own per-transaction
  -- settings: read-only by default, bounded statements, UTC timestamps.
  EXECUTE format('ALTER ROLE kl_reader IN DATABASE %I SET default_transaction_read_only = on', current_database());
  EXECUTE format('ALTER ROLE kl_reader IN DATABASE %I SET statement_timeout = %L', current_database(), '5min');
  EXECUTE format('ALTER ROLE kl_reader IN DATABASE %I SET idle_in_transaction_session_timeout = %L', current_database(), '1min');
  EXECUTE format('ALTER ROLE kl_reader IN DATABASE %I SET TimeZone = %L', current_database(), 'UTC');
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO kl_reader', current_database());
END
$$;

GRANT USAGE ON SCHEMA public TO kl_reader;

-- The documented read models (docs/sql.md), and nothing else: not kl_events,
-- kl_streams, kl_snapshots, kl_checkpoints or kl_migrations. A migration that
-- adds a read model grants SELECT on it to kl_reader in the same file.
GRANT SELECT ON states, state_versions, resources, current_resources, resource_dependencies,
  outputs, state_locks, raw_state TO kl_reader;
