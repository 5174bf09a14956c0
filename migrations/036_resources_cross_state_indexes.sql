-- Two indexes of `resources` that no query needs any more. Every index on
-- `resources` is written for each row a commit opens (a first commit of
-- 20,000 instances: 20,000 entries in each), and together these two were
-- about 50 ms of the ~400 ms of CPU one PostgreSQL backend spends on that
-- commit's `COPY resources` (docs/performance.md, "The first commit:
-- PostgreSQL's work per `resources` row (wave 14)").
--
-- Both index one column across every state (migration 002): `type` ("every
-- bucket in all states") and `address`. A query over every state reaches
-- `resources` through a state: `current_resources` joins `states`, and every
-- view of the SQL surface (kl_query, migration 013) checks the row's state
-- against the reader's grants, so PostgreSQL walks the states and looks
-- each one up in an index that starts with `state_id` —
-- `resources_live_inventory` (state_id, type, …) for live rows by type,
-- `resources_type_name` (state_id, type, …) over every lifecycle, the key
-- (state_id, address, …) by address — as fast as through the dropped
-- indexes. Only a query on the table itself, as its owner, with no state
-- at all, now reads one of those indexes whole (a few ms per 100,000 rows).
DROP INDEX IF EXISTS resources_type;
DROP INDEX IF EXISTS resources_address;
