-- Refresh outcomes beyond unchanged/drifted/gone/failed (docs/sql.md):
-- `normalized`, a read that differs from the recorded object in spelling only
-- (null against an empty collection, an absent member against a null one),
-- stored but not drift; and `skipped`, a built-in resource (terraform_data)
-- that no provider plugin reads. refresh_runs counts both apart from
-- `checked`/`changed`, and the drift view leaves normalized reads out.

ALTER TABLE refresh_results DROP CONSTRAINT refresh_results_outcome_check;
ALTER TABLE refresh_results ADD CONSTRAINT refresh_results_outcome_check
  CHECK (outcome IN ('unchanged', 'normalized', 'drifted', 'gone', 'failed', 'skipped'));

ALTER TABLE refresh_runs
  ADD COLUMN normalized integer NOT NULL DEFAULT 0,
  ADD COLUMN skipped    integer NOT NULL DEFAULT 0;

-- As in 005, but an instance whose refresh result is `normalized` is not
-- drift: the refresh stored the provider's spelling of an unchanged object.
CREATE OR REPLACE VIEW current_resource_drift AS
SELECT s.name AS state_name,
       r.state_id,
       r.address,
       r.type,
       r.provider,
       p.attributes AS previous_attributes,
       r.attributes AS current_attributes,
       coalesce(res.changed_paths, (
         SELECT coalesce(jsonb_agg(k ORDER BY k), '[]'::jsonb)
           FROM (SELECT jsonb_object_keys(CASE jsonb_typeof(p.attributes)
                          WHEN 'object' THEN p.attributes ELSE '{}' END) AS k
                 UNION
                 SELECT jsonb_object_keys(CASE jsonb_typeof(r.attributes)
                          WHEN 'object' THEN r.attributes ELSE '{}' END)) keys
          WHERE p.attributes -> k IS DISTINCT FROM r.attributes -> k
       )) AS changed_paths,
       r.create_serial AS detected_serial,
       r.create_version AS detected_version,
       run.run_id AS refresh_run_id
  FROM resources r
  JOIN states s ON s.state_id = r.state_id AND s.deleted_at IS NULL
  JOIN state_versions v
    ON v.state_id = r.state_id AND v.version = r.create_version AND v.source = 'refresh'
  JOIN resources p
    ON p.state_id = r.state_id AND p.address = r.address AND p.delete_version = r.create_version
  LEFT JOIN refresh_runs run ON run.state_id = r.state_id AND run.to_version = r.create_version
  LEFT JOIN refresh_results res ON res.run_id = run.run_id AND res.address = r.address
 WHERE r.delete_version IS NULL
   AND res.outcome IS DISTINCT FROM 'normalized'
   AND NOT EXISTS (SELECT 1 FROM state_versions later
                    WHERE later.state_id = r.state_id
                      AND later.version > r.create_version
                      AND later.source <> 'refresh');
