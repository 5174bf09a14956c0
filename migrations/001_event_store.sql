-- The event store: the append-only truth every read model is projected from.

CREATE TABLE kl_streams (
  stream_id   text PRIMARY KEY,
  -- number of events in the stream; the revision of the last event is length - 1
  length      bigint NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE kl_events (
  global_position  bigserial PRIMARY KEY,
  -- Readers order and filter by the writing transaction: a sequence number
  -- taken early by a transaction that commits late would otherwise be skipped.
  transaction_id   xid8 NOT NULL DEFAULT pg_current_xact_id(),
  stream_id        text NOT NULL,
  stream_revision  bigint NOT NULL,
  type             text NOT NULL,
  -- json, not jsonb: it keeps the text exactly as written, including \u0000
  -- escapes that jsonb refuses (terraform strings may hold NUL).
  data             json NOT NULL,
  metadata         jsonb NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (stream_id, stream_revision)
);

CREATE INDEX kl_events_log_order ON kl_events (transaction_id, global_position);

-- Aggregate snapshots: a cold start reads the snapshot plus the tail, not the
-- whole stream.
CREATE TABLE kl_snapshots (
  stream_id   text PRIMARY KEY,
  revision    bigint NOT NULL,
  schema      text NOT NULL,
  state       json NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Projection checkpoints: (transaction_id, global_position) of the last event
-- each projection has applied, advanced compare-and-set with its rows.
CREATE TABLE kl_checkpoints (
  projection       text PRIMARY KEY,
  transaction_id   xid8 NOT NULL DEFAULT '0',
  global_position  bigint NOT NULL DEFAULT 0,
  updated_at       timestamptz NOT NULL DEFAULT now()
);
