-- Fewer indexes on `resources`. Every index on `resources` is written for
-- each row a commit opens (a first commit of 20,000 instances: 20,000
-- entries in each); the three dropped here were about 65 ms of the ~420 ms
-- of CPU one PostgreSQL backend spent on that commit's `COPY resources`
-- (docs/performance.md, "The first commit: PostgreSQL's work per
-- `resources` row (wave 14)").
--
-- resources_type and resources_address (migration 002) index one column
-- across every state: `type` ("every bucket in all states") and `address`.
-- A query over every state reaches `resources` through a state:
-- `current_resources` joins `states`, and every view of the SQL surface
-- (kl_query, migration 013) checks the row's state against the reader's
-- grants, so PostgreSQL walks the states and looks each one up in an index
-- that starts with `state_id` — `resources_live_inventory` (state_id, type,
-- …) for live rows by type, `resources_type_name` (state_id, type, …) over
-- every lifecycle, the key (state_id, address, …) by address — as fast as
-- through the dropped indexes. Only a query on the table itself, as its
-- owner, naming no state, now reads one of those indexes whole (a few ms
-- per 100,000 rows).
DROP INDEX IF EXISTS resources_type;
DROP INDEX IF EXISTS resources_address;

-- The quota count (QuotaReadModel: a state's live managed, non-deposed
-- rows) had an index of its own, resources_live_counted (migration 017),
-- one more entry per row for one query. The live inventory's index now
-- ends with the two columns that count filters on, so the count is an
-- index-only scan of it, both conditions in its index condition, as the
-- inventories by type and module already are. Key columns rather than
-- INCLUDE: an index with INCLUDE columns is not deduplicated, and this one
-- holds a few distinct keys per state (20 pages for 20,000 rows against
-- 222).
DROP INDEX IF EXISTS resources_live_counted;
DROP INDEX IF EXISTS resources_live_inventory;
CREATE INDEX resources_live_inventory ON resources (state_id, type, module_path, mode, deposed_key)
  WHERE delete_version IS NULL;
