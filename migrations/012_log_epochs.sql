-- The log's order survives a dump and restore into another cluster.
--
-- Readers order events by (transaction_id, global_position) and see only
-- transactions older than every running one (001_event_store.sql). Stored
-- transaction ids are data: restored into a cluster whose transaction counter
-- is behind them, new events would sort before old ones, readers (projectors
-- and subscribers) would pass over them, and the old ones would hide behind
-- the visibility horizon. So the log counts epochs: `transaction_id` holds the
-- writing transaction's id plus epoch × 2^48 (a cluster reaches 2^48
-- transactions after centuries), and an append that finds the cluster's ids
-- behind the newest stored one opens the next epoch, whose keys sort after
-- every key of the one before. Epoch 0 adds nothing, so logs written before
-- this migration keep their keys. The first 4 hex digits of a subscription
-- cursor are the epoch (docs/events.md).
CREATE TABLE kl_log_epochs (
  epoch        integer PRIMARY KEY CHECK (epoch >= 0 AND epoch < 32767),
  started_at   timestamptz NOT NULL DEFAULT now(),
  -- the cluster's own id of the transaction that opened it
  started_xid  xid8 NOT NULL,
  reason       text NOT NULL
);
INSERT INTO kl_log_epochs (epoch, started_xid, reason)
VALUES (0, pg_current_xact_id(), 'log created');

CREATE FUNCTION kl_log_epoch() RETURNS integer
LANGUAGE sql STABLE
AS $$ SELECT max(epoch) FROM kl_log_epochs $$;

-- Is the newest key in the log at or past what this cluster's next
-- transaction gets in epoch `e`? Never in the cluster that wrote the log:
-- every key this snapshot sees belongs to a transaction below its xmax.
CREATE FUNCTION kl_log_behind(e integer) RETURNS boolean
LANGUAGE sql STABLE
AS $$
  SELECT coalesce(
    (SELECT k.transaction_id FROM kl_events k ORDER BY k.transaction_id DESC LIMIT 1)
      >= ((e::bigint << 48) + pg_snapshot_xmax(pg_current_snapshot())::text::bigint)::text::xid8,
    false)
$$;

-- The epoch a transaction writes in now, opening the next one (once, under
-- a lock) when the cluster is behind the log.
CREATE FUNCTION kl_log_writable_epoch() RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  e integer := kl_log_epoch();
BEGIN
  IF NOT kl_log_behind(e) THEN
    RETURN e;
  END IF;
  PERFORM pg_advisory_xact_lock(7300422, 12);
  e := kl_log_epoch();  -- a new snapshot: another writer may have opened it
  IF kl_log_behind(e) THEN
    e := e + 1;
    INSERT INTO kl_log_epochs (epoch, started_xid, reason)
    VALUES (e, pg_current_xact_id(),
            'transaction ids of this cluster are behind the log (restored from a dump?)');
  END IF;
  RETURN e;
END
$$;

-- The key of the calling transaction's events. Worked out once per
-- transaction (kept in a transaction-local setting): it is the column's
-- default, evaluated per row.
CREATE FUNCTION kl_log_xact() RETURNS xid8
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  x bigint := pg_current_xact_id()::text::bigint;
  known text := current_setting('kl.log_xact', true);
  key xid8;
BEGIN
  IF known LIKE x::text || '=%' THEN
    RETURN split_part(known, '=', 2)::xid8;
  END IF;
  IF x >= (1::bigint << 48) THEN
    RAISE EXCEPTION 'transaction id % does not fit the log''s 48 bits', x;
  END IF;
  key := ((kl_log_writable_epoch()::bigint << 48) + x)::text::xid8;
  PERFORM set_config('kl.log_xact', x::text || '=' || key::text, true);
  RETURN key;
END
$$;

-- Readers see keys below this: every older epoch, and the current epoch's
-- transactions older than any still running.
CREATE FUNCTION kl_log_horizon() RETURNS xid8
LANGUAGE sql STABLE
AS $$
  SELECT ((kl_log_epoch()::bigint << 48)
          + pg_snapshot_xmin(pg_current_snapshot())::text::bigint)::text::xid8
$$;

ALTER TABLE kl_events ALTER COLUMN transaction_id SET DEFAULT kl_log_xact();

-- The subscription cursor of an event: 16 hex digits of its key, 16 of its
-- global position; fixed width, so cursors compare as text in log order.
CREATE FUNCTION kl_log_cursor(transaction_id xid8, global_position bigint) RETURNS text
LANGUAGE sql IMMUTABLE STRICT
AS $$
  SELECT lpad(to_hex(transaction_id::text::bigint), 16, '0') || '-'
         || lpad(to_hex(global_position), 16, '0')
$$;

-- The documented window onto the log gains the cursor: `ORDER BY cursor` is
-- the order subscribers get the events in. New columns go last (see 009).
CREATE OR REPLACE VIEW event_log AS
SELECT e.global_position AS position,
       e.stream_id AS stream,
       e.type,
       e.metadata->>'actor' AS actor,
       (e.metadata->>'occurredAt')::timestamptz AS occurred_at,
       e.data,
       e.event_id,
       e.schema_version,
       kl_log_cursor(e.transaction_id, e.global_position) AS cursor
  FROM kl_events e;
