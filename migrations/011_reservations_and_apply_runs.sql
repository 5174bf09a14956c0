-- Parallel apply (ADR 0007, issue 11): reservations and apply runs, and
-- terraform locks as reservations (docs/sql.md). All three tables are
-- projections of the log (streams state-<name> and apply-<run_id>).

-- A plan's lock is shared, so a state may have several terraform locks at
-- once: one row per lock, and whether it is a plan's (read) or not (write).
-- Rows written before this migration were exclusive locks: write.
ALTER TABLE state_locks DROP CONSTRAINT state_locks_pkey;
ALTER TABLE state_locks ADD PRIMARY KEY (state_id, lock_id);
ALTER TABLE state_locks
  ADD COLUMN mode text NOT NULL DEFAULT 'write' CHECK (mode IN ('read', 'write'));

-- Who holds which addresses of a state now: apply runs' reservations, and
-- terraform locks as the `*` reservations they are. A run whose lease ran
-- out stays until someone reclaims it (expires_at tells).
CREATE TABLE resource_reservations (
  state_id      uuid NOT NULL,
  state_name    text NOT NULL,
  -- the reservation's id, or the terraform lock's ID
  id            text NOT NULL,
  kind          text NOT NULL CHECK (kind IN ('apply', 'terraform-lock', 'terraform-plan')),
  run_id        text,
  address_glob  text NOT NULL,
  mode          text NOT NULL CHECK (mode IN ('read', 'write')),
  holder        text NOT NULL,
  info          jsonb NOT NULL,
  acquired_at   timestamptz NOT NULL,
  expires_at    timestamptz,
  PRIMARY KEY (state_id, kind, id)
);

CREATE INDEX resource_reservations_name ON resource_reservations (state_name);
CREATE INDEX resource_reservations_run ON resource_reservations (run_id);

-- One row per `kl apply` run, from its start (reservations granted) to its end.
CREATE TABLE apply_runs (
  run_id             text PRIMARY KEY,
  state_id           uuid NOT NULL,
  state_name         text NOT NULL,
  actor              text NOT NULL,
  status             text NOT NULL
                       CHECK (status IN ('running', 'committed', 'failed', 'aborted', 'conflict')),
  lane               text NOT NULL,
  base_version       integer NOT NULL,
  write_set          text[] NOT NULL,
  read_set           text[] NOT NULL,
  -- [{id, glob, mode}] as granted
  reservations       jsonb NOT NULL,
  info               jsonb NOT NULL,
  started_at         timestamptz NOT NULL,
  finished_at        timestamptz,
  finished_by        text,
  added              integer,
  changed            integer,
  destroyed          integer,
  committed_version  integer,
  committed_serial   bigint,
  error_summary      text,
  -- the state document terraform left when the run did not commit, exactly as sent
  output_state       json
);

CREATE INDEX apply_runs_state_name ON apply_runs (state_name, started_at DESC);

-- The version a run committed names it.
ALTER TABLE state_versions ADD COLUMN run_id text;

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'kl_reader') THEN
    GRANT SELECT ON resource_reservations, apply_runs TO kl_reader;
  END IF;
END
$$;
