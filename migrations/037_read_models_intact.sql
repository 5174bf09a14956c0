-- The read models without WAL (docs/operations.md, "Read models without
-- WAL"). With KL_UNLOGGED_READ_MODELS on, the bulk read models (resources,
-- outputs, raw_state, raw_state_chunks, resource_edges,
-- resource_edge_sources) are UNLOGGED tables: a first commit of a big state
-- writes 70 % less WAL. PostgreSQL empties every unlogged table
-- when it recovers from a crash (any backend's, an immediate shutdown, the
-- machine's), and a standby has none of their rows, while the projectors'
-- checkpoints (logged) stay where they were: the read models would then
-- look whole and be empty.
--
-- This table holds one row while the read models hold what their
-- checkpoints say. It has their persistence (kld switches them together,
-- in one transaction), so a crash that empties them empties it too, in the
-- same recovery, before any connection is accepted. kld asks for the row on
-- every connection it opens; without it kld refuses reads of those tables
-- (503, retryable), rebuilds them from the log, and writes the row back.
CREATE TABLE kl_read_models_intact (
  intact boolean PRIMARY KEY DEFAULT true CHECK (intact)
);
INSERT INTO kl_read_models_intact VALUES (true);
