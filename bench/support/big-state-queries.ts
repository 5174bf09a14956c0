import { PRIMARY_LEADER } from './big-state-generator';

/**
 * The big-state demo questions, each asked two ways: the SQL of docs/sql.md
 * ("Example: the big-state demo") over the read models, and a jq filter over
 * the raw state file. Both answers are brought to one canonical JSON form
 * (`canonical`) so the bench can say whether they agree.
 */
export interface DemoQuery {
  key: 'by-type' | 'by-module' | 'blast-radius';
  label: string;
  /** Server-side target (planning + execution), ms. */
  targetMs: number;
  sql: string;
  jq: string;
}

export const STATE_NAME = 'big-state';

/**
 * Resource address and instance address of each instance, as kilolock
 * derives them (`resource_address`, `address`): module path, `data.` for
 * data sources, `[key]` with a string key quoted, ` (deposed object k)`.
 */
const JQ_INSTANCES = `
  def raddr: (if .module then .module + "." else "" end)
    + (if .mode == "data" then "data." else "" end) + .type + "." + .name;
  [ .resources[] | raddr as $r | .instances[]
    | { r: $r,
        a: ($r
          + (if has("index_key") then "[" + (.index_key | tojson) + "]" else "" end)
          + (if .deposed then " (deposed object " + .deposed + ")" else "" end)),
        d: (.dependencies // []) } ]`;

/**
 * The recursion the SQL runs, level by level: level k + 1 is every instance
 * naming, in its dependencies, the resource address of an instance of level
 * k. Like the SQL's UNION over (address, depth), an instance may appear at
 * several depths; "deepest" is the last non-empty level.
 */
const JQ_REACH = `${JQ_INSTANCES} as $all
  | [ $all[] | select(.a == ${JSON.stringify(PRIMARY_LEADER)}) ] as $start
  | { level: $start, depth: 0, deepest: 0, seen: ($start | map({ key: .a, value: true }) | from_entries) }
  | until(.level | length == 0;
      (.level | map({ key: .r, value: true }) | from_entries) as $rs
      | [ $all[] | select(any(.d[]; $rs[.] == true)) ] as $next
      | .depth += 1
      | .deepest = (if ($next | length) > 0 then .depth else .deepest end)
      | .seen += ($next | map({ key: .a, value: true }) | from_entries)
      | .level = $next)`;

/** docs/sql.md's blast radius of the primary herd's leader, up to its final SELECT. */
const REACH_CTE = `WITH RECURSIVE reach AS (
  SELECT s.state_id, '${PRIMARY_LEADER}'::text AS resource_address, 0 AS depth
    FROM states s WHERE s.name = '${STATE_NAME}' AND s.deleted_at IS NULL
  UNION
  SELECT e.state_id, e.from_resource_address, reach.depth + 1
    FROM reach
    JOIN resource_edges e
      ON e.state_id = reach.state_id AND e.to_address = reach.resource_address
),
reached AS (SELECT DISTINCT state_id, resource_address FROM reach)`;

const REACHED_INSTANCES = `FROM reached
  JOIN current_resources r
    ON r.state_id = reached.state_id AND r.resource_address = reached.resource_address`;

export const QUERIES: DemoQuery[] = [
  {
    key: 'by-type',
    label: 'inventory by type',
    targetMs: 20,
    sql: `SELECT type, count(*)::int AS instances
  FROM current_resources
 WHERE state_name = '${STATE_NAME}'
 GROUP BY type ORDER BY instances DESC`,
    jq: `[ .resources[] | { k: .type, n: (.instances | length) } ]
  | group_by(.k) | map([ .[0].k, (map(.n) | add) ]) | sort_by(-.[1])`,
  },
  {
    key: 'by-module',
    label: 'inventory by module',
    targetMs: 20,
    sql: `SELECT COALESCE(NULLIF(module_path, ''), '(root)') AS module, count(*)::int AS instances
  FROM current_resources
 WHERE state_name = '${STATE_NAME}'
 GROUP BY module ORDER BY instances DESC`,
    jq: `[ .resources[] | { k: (.module // "(root)"), n: (.instances | length) } ]
  | group_by(.k) | map([ .[0].k, (map(.n) | add) ]) | sort_by(-.[1])`,
  },
  {
    key: 'blast-radius',
    label: 'blast radius of the primary leader',
    targetMs: 100,
    sql: `${REACH_CTE}
SELECT (SELECT count(*)::int ${REACHED_INSTANCES}) AS reachable_instances,
       (SELECT max(depth) FROM reach) AS longest_chain`,
    jq: `${JQ_REACH} | [ [ (.seen | length), .deepest ] ]`,
  },
];

/**
 * The blast radius as it was walked before resource_edges (migration 023):
 * over the instance edges, a row per instance per step. Timed beside the
 * new walk by bench:queries; the answer must be the same.
 */
export const BLAST_RADIUS_OVER_INSTANCE_EDGES = REACH_CTE.replace(
  `JOIN resource_edges e
      ON e.state_id = reach.state_id AND e.to_address = reach.resource_address`,
  `JOIN resource_dependencies e
      ON e.state_id = reach.state_id AND e.to_address = reach.resource_address
     AND e.delete_version IS NULL`,
).concat(`
SELECT (SELECT count(*)::int ${REACHED_INSTANCES}) AS reachable_instances,
       (SELECT max(depth) FROM reach) AS longest_chain`);

/**
 * The blast radius as a set of instance addresses, both ways: not timed,
 * a stronger check than the counts that the two walks reach the same
 * instances.
 */
export const BLAST_RADIUS_SET = {
  sql: `${REACH_CTE}
SELECT r.address ${REACHED_INSTANCES}`,
  jq: `${JQ_REACH} | .seen | keys`,
};

/**
 * One form for both answers: rows as arrays, numbers as numbers, sorted
 * (ties in `ORDER BY instances DESC` may come back in any order).
 */
export function canonical(rows: unknown): string {
  if (!Array.isArray(rows)) return JSON.stringify(rows);
  if (rows.every((r) => Array.isArray(r))) {
    return JSON.stringify(
      rows.map((r) => JSON.stringify(r)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
    );
  }
  return JSON.stringify(rows);
}
