-- A version whose lineage differs from the previous version's (terraform
-- `state push -force`, or an import forced over another lineage) records the
-- lineage it replaced. Filled from ApplyCommitted's `lineageChanged`; versions
-- written before this column existed keep NULL, so a replay yields the same rows.
ALTER TABLE state_versions ADD COLUMN lineage_changed_from text;
