-- State-engine lane (ADR 0029): scope expansion walks dependency edges in
-- both directions and matches candidates by module path; a slice of a past
-- version (kl rollback resource) reads one resource's lifecycles.

-- Upstream walk: what a resource depends on (the other direction has
-- resource_dependencies_live_to).
CREATE INDEX resource_dependencies_live_from ON resource_dependencies (state_id, from_resource_address)
  INCLUDE (to_address) WHERE delete_version IS NULL;

-- Module prefixes and selectors under a module (LIKE 'module.net.%').
CREATE INDEX resources_live_module ON resources (state_id, module_path text_pattern_ops)
  WHERE delete_version IS NULL;
CREATE INDEX resources_module ON resources (state_id, module_path text_pattern_ops);

-- Candidates by resource (type, name), now and over every lifecycle
-- (removed vs undeployed, slices of past versions).
CREATE INDEX resources_live_type_name ON resources (state_id, type, name, index_key)
  WHERE delete_version IS NULL;
CREATE INDEX resources_type_name ON resources (state_id, type, name, index_key);
