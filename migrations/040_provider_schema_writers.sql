-- A provider version's schema per writer (docs/security.md, "the provider
-- schema cache"). One row per (source, version) let any token with write on
-- some state be the first to store a wrong schema for a version nobody had
-- cached, and every other user's refresh then decoded with it. A row now
-- names who stored it: '' for kld's own GetSchema, an admin token and a
-- write with authentication off (trusted by everyone), else the token's
-- name, whose rows serve that token alone.
ALTER TABLE provider_schemas ADD COLUMN writer text NOT NULL DEFAULT '';
ALTER TABLE provider_schemas DROP CONSTRAINT provider_schemas_pkey;
ALTER TABLE provider_schemas ADD PRIMARY KEY (source, version, writer);

-- The SQL surface (migration 013) shows the new column too.
DO $$
DECLARE
  live text := current_schema();
BEGIN
  EXECUTE format(
    'CREATE OR REPLACE VIEW kl_query.provider_schemas WITH (security_barrier) AS SELECT x.* FROM %I.provider_schemas x WHERE true',
    live);
END
$$;
