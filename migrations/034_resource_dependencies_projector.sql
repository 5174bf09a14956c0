-- resource_dependencies gets a projector of its own (state-resource-dependencies),
-- split from state-resource-lifecycles so that PostgreSQL writes a big commit's
-- lifecycles and its edges on two connections at once (docs/performance.md,
-- "The first commit (wave 11)"). The table is already projected up to the
-- lifecycles projector's checkpoint: the new projector continues from there
-- (with the same skipped events) instead of replaying the log.
INSERT INTO kl_checkpoints (projection, transaction_id, global_position)
SELECT 'state-resource-dependencies', transaction_id, global_position
  FROM kl_checkpoints WHERE projection = 'state-resource-lifecycles';
INSERT INTO kl_projection_skips (projection, global_position, reason)
SELECT 'state-resource-dependencies', global_position, reason
  FROM kl_projection_skips WHERE projection = 'state-resource-lifecycles';
