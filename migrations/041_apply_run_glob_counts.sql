-- The apply-runs listing's summary of a run (docs/api.md): how many globs it
-- reserved in each mode and the first 3 as granted, kept when the run starts.
-- Counted at each listing instead, PostgreSQL read every listed run's
-- reservations: 100 runs of a `kl state rm` of 5,000 addresses took 0.8 s
-- of every dashboard refresh. The SQL surface's apply_runs view keeps its
-- documented columns (migration 013 fixed them).
ALTER TABLE apply_runs
  ADD COLUMN write_globs integer NOT NULL DEFAULT 0,
  ADD COLUMN read_globs integer NOT NULL DEFAULT 0,
  ADD COLUMN first_write_globs text[] NOT NULL DEFAULT '{}',
  ADD COLUMN first_read_globs text[] NOT NULL DEFAULT '{}';

UPDATE apply_runs a
   SET write_globs = g.write_globs,
       read_globs = g.read_globs,
       first_write_globs = coalesce(g.first_write_globs, '{}'),
       first_read_globs = coalesce(g.first_read_globs, '{}')
  FROM apply_runs r
 CROSS JOIN LATERAL (
   SELECT count(*) FILTER (WHERE e.r->>'mode' = 'write') AS write_globs,
          count(*) FILTER (WHERE e.r->>'mode' = 'read') AS read_globs,
          (array_agg(e.r->>'glob' ORDER BY e.i) FILTER (WHERE e.r->>'mode' = 'write'))[1:3]
            AS first_write_globs,
          (array_agg(e.r->>'glob' ORDER BY e.i) FILTER (WHERE e.r->>'mode' = 'read'))[1:3]
            AS first_read_globs
     FROM jsonb_array_elements(r.reservations) WITH ORDINALITY AS e(r, i)
 ) g
 WHERE r.run_id = a.run_id;

-- Every run writes them (the apply-runs projector).
ALTER TABLE apply_runs
  ALTER COLUMN write_globs DROP DEFAULT,
  ALTER COLUMN read_globs DROP DEFAULT,
  ALTER COLUMN first_write_globs DROP DEFAULT,
  ALTER COLUMN first_read_globs DROP DEFAULT;
