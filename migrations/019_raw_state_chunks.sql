-- raw_state in chunks: a commit that changes a few instances of a big state
-- writes the few chunks around them and a small manifest, not the whole
-- document again. A chunk is a run of the served bytes cut at instance
-- boundaries chosen by content (src/domain/terraform/document-chunks.ts);
-- a state's chunks are exactly those its current manifest lists.
CREATE TABLE raw_state_chunks (
  state_id  uuid NOT NULL,
  chunk_id  text NOT NULL,
  bytes     bytea NOT NULL,
  PRIMARY KEY (state_id, chunk_id)
);
-- Already compressed or not, the bytes are read whole: no TOAST compression.
ALTER TABLE raw_state_chunks ALTER COLUMN bytes SET STORAGE EXTERNAL;

ALTER TABLE raw_state ADD COLUMN chunks text[];

-- Every stored document becomes one chunk; the next commit of the state
-- cuts it properly (its manifest then shares no id with this one).
INSERT INTO raw_state_chunks (state_id, chunk_id, bytes)
SELECT state_id, 'whole-' || md5(document), convert_to(document, 'UTF8')
  FROM raw_state WHERE document IS NOT NULL;
UPDATE raw_state SET chunks = ARRAY['whole-' || md5(document)] WHERE document IS NOT NULL;

-- The SQL surface keeps raw_state.document (the document assembled from its
-- chunks) and md5 (of those bytes); the table itself no longer holds them.
DROP VIEW IF EXISTS kl_query.raw_state;
ALTER TABLE raw_state DROP COLUMN document, DROP COLUMN md5;

DO $$
DECLARE
  live text := current_schema();
BEGIN
  EXECUTE format($v$
    CREATE VIEW kl_query.raw_state WITH (security_barrier) AS
    SELECT x.state_id, x.name, x.version, x.serial,
           convert_from(d.bytes, 'UTF8') AS document,
           encode(decode(md5(d.bytes), 'hex'), 'base64') AS md5,
           x.updated_at
      FROM %1$I.raw_state x
      LEFT JOIN LATERAL (
        SELECT string_agg(c.bytes, ''::bytea ORDER BY m.ord) AS bytes
          FROM unnest(x.chunks) WITH ORDINALITY AS m(chunk_id, ord)
          JOIN %1$I.raw_state_chunks c ON c.state_id = x.state_id AND c.chunk_id = m.chunk_id
      ) d ON x.chunks IS NOT NULL
     WHERE EXISTS (SELECT 1 FROM kl_query_grants g
                    WHERE g.pid = pg_backend_pid() AND x.name LIKE ANY (g.patterns))$v$, live);
  EXECUTE format($v$
    CREATE VIEW kl_query.raw_state_chunks WITH (security_barrier) AS
    SELECT x.* FROM %1$I.raw_state_chunks x
     WHERE EXISTS (SELECT 1 FROM %1$I.states s JOIN kl_query_grants g ON g.pid = pg_backend_pid()
                    WHERE s.state_id = x.state_id AND s.name LIKE ANY (g.patterns))$v$, live);
END
$$;
GRANT SELECT ON kl_query.raw_state, kl_query.raw_state_chunks TO kl_reader;
