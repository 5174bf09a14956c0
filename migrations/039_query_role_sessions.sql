-- Every query (POST /v1/query, kl query) runs as the one role kl_reader, and
-- PostgreSQL lets a role read the statement text of its own other sessions
-- (pg_stat_activity) and cancel or terminate them: one caller could read the
-- SQL another is running (which may name states, or hold values, it may not
-- read) and end the other's query, on every replica. Only a superuser can
-- take that away: the reader's sessions report no statement, and only the
-- owner (and superusers) may signal a backend in this database. kld cancels
-- a reader's statement as the owner (sql-query.service.ts). Without a
-- superuser this changes nothing and says so (docs/sql.md: what a DBA runs).
DO $$
BEGIN
  EXECUTE format('ALTER ROLE kl_reader IN DATABASE %I SET track_activities = off', current_database());
  REVOKE EXECUTE ON FUNCTION pg_catalog.pg_cancel_backend(integer) FROM PUBLIC;
  REVOKE EXECUTE ON FUNCTION pg_catalog.pg_terminate_backend(integer, bigint) FROM PUBLIC;
  EXECUTE format('GRANT EXECUTE ON FUNCTION pg_catalog.pg_cancel_backend(integer) TO %I', current_user);
  EXECUTE format('GRANT EXECUTE ON FUNCTION pg_catalog.pg_terminate_backend(integer, bigint) TO %I', current_user);
EXCEPTION
  WHEN insufficient_privilege THEN
    RAISE WARNING 'kl_reader''s sessions still see and can end each other (%): see docs/sql.md', SQLERRM;
END
$$;
