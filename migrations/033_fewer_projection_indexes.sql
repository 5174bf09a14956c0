-- Fewer indexes to keep up per projected row. Every index on `resources`
-- and `resource_dependencies` is written for each row a commit opens (a
-- first commit of 20,000 instances: 20,000 rows and 60,000 edges), and three
-- of them serve no query another index does not serve as well
-- (docs/performance.md, "The first commit: indexes and server settings").

-- The live-only copies of (state_id, type, name, index_key) and
-- (state_id, module_path): neither covers its queries, so a read through
-- them visits the table anyway, and the index over every lifecycle
-- (resources_type_name, resources_module, migration 016) finds the same
-- rows plus the closed lifecycles of the same resource or module, which the
-- `delete_version IS NULL` filter drops. Live inventories by type keep
-- resources_live_inventory.
DROP INDEX IF EXISTS resources_live_type_name;
DROP INDEX IF EXISTS resources_live_module;

-- The upstream walk's index (migration 016): since migration 023 walks read
-- resource_edges, whose key (state_id, from_resource_address, to_address)
-- holds exactly these live pairs, one row per resource instead of one per
-- instance.
DROP INDEX IF EXISTS resource_dependencies_live_from;
