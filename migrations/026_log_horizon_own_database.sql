-- The readers' horizon waits only for transactions that could still append
-- to this database's log.
--
-- Until now the horizon was the snapshot's xmin (012_log_epochs.sql): the
-- oldest transaction running anywhere in the cluster. A transaction held
-- open in another database of the same server (an application sharing the
-- cluster, a long report, a forgotten psql session) then stopped every
-- projector and every non-following feed read here for as long as it ran,
-- although it can never write a row into this database.
--
-- The horizon is now the oldest of:
--   * the snapshot's running transactions, except those seen running in
--     another database (pg_stat_get_activity, the function behind
--     pg_stat_activity; backend_xid and datid are shown to every role);
--   * this transaction's own id, if it has one (its appends are not
--     committed yet);
--   * the snapshot's xmax (nothing at or past it is known to be finished).
-- Only a transaction observed running in another database is passed over,
-- and a transaction never changes database, so nothing that can append
-- here is ever passed. One that finished between the snapshot and the look
-- at pg_stat_activity, a prepared transaction, or anything else not found
-- there counts as this database's: the horizon waits for it, as before.
-- pg_stat_activity shows 32-bit ids; running ids are far closer together
-- than 2^32, so comparing the low 32 bits is exact.
-- Reading pg_stat_activity costs a few tenths of a millisecond, which busy
-- writers would pay on every read of every projector. So it is read only
-- when the cheap horizon (the snapshot's xmin, as before) hides a
-- committed event; otherwise the two horizons show the same events.
CREATE OR REPLACE FUNCTION kl_log_horizon() RETURNS xid8
LANGUAGE plpgsql STABLE
AS $$
DECLARE
  s pg_snapshot := pg_current_snapshot();
  epoch bigint := kl_log_epoch()::bigint << 48;
  h bigint := least(pg_snapshot_xmax(s)::text::bigint,
                    pg_current_xact_id_if_assigned()::text::bigint);
  oldest bigint := pg_snapshot_xmin(s)::text::bigint;
BEGIN
  -- In log order, so that even a generic plan walks the log's index and
  -- stops at the first row (an EXISTS may be planned as a scan of the log).
  IF (SELECT k.transaction_id FROM kl_events k
       WHERE k.transaction_id >= (epoch + oldest)::text::xid8
       ORDER BY k.transaction_id LIMIT 1) IS NULL THEN
    RETURN (epoch + least(h, oldest))::text::xid8;
  END IF;
  SELECT least(h, min(x::text::bigint)) INTO h
    FROM pg_snapshot_xip(s) AS x
   WHERE x::text::bigint % 4294967296 NOT IN (
           SELECT a.backend_xid::text::bigint
             FROM pg_stat_get_activity(NULL) AS a
            WHERE a.backend_xid IS NOT NULL
              AND a.datid <> (SELECT d.oid FROM pg_database d
                               WHERE d.datname = current_database()));
  RETURN (epoch + h)::text::xid8;
END
$$;
