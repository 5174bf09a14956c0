-- Events a projector passes over, recorded by an operator (`kld projections
-- skip`, docs/operations.md) for an event it can never apply. Kept apart
-- from kl_checkpoints so that a rebuild, which resets checkpoints, still
-- skips them. The event itself stays in the log.
CREATE TABLE kl_projection_skips (
  projection       text NOT NULL,
  global_position  bigint NOT NULL,
  reason           text NOT NULL,
  skipped_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (projection, global_position)
);
