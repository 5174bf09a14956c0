-- A projector batch's checkpoint move as one function call, so that kld can
-- send it in the same message as the batch's COMMIT (one round trip instead
-- of two per batch; docs/performance.md, "The next-serial push (wave 11,
-- second round)"). The move stays compare-and-set: when the checkpoint is no
-- longer where the batch read it, the call fails inside the statement, the
-- COMMIT behind it is never run, and the batch rolls back and goes again
-- (serialization_failure, as any lost race). The wake-up is sent at commit,
-- only when the checkpoint moved, as before.
CREATE FUNCTION kl_move_checkpoint(
  projector text, from_tx xid8, from_gp bigint, to_tx xid8, to_gp bigint, channel text
) RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
  UPDATE kl_checkpoints
     SET transaction_id = to_tx, global_position = to_gp, updated_at = now()
   WHERE projection = projector AND transaction_id = from_tx AND global_position = from_gp;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'checkpoint of % moved under us', projector USING ERRCODE = 'serialization_failure';
  END IF;
  PERFORM pg_notify(channel, projector);
END
$$;
