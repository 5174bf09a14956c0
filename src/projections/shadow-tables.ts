import type { Database, Queryable } from '../infrastructure/postgres/database';

/**
 * A rebuild replays the log into copies of the read models that sit in a
 * schema of their own, beside the live tables, which keep serving reads and
 * taking the live projection all along. The copies have the live tables'
 * names, so projectors write to them unchanged: a transaction that puts the
 * shadow schema first in its search_path addresses the copies (and still
 * reads kl_events from the live schema). The swap then moves the copies into
 * place in one short transaction.
 *
 * What a copy carries over: columns, defaults, NOT NULL and CHECK
 * constraints, storage and comments (LIKE … INCLUDING ALL), keys, unique and
 * exclusion constraints and indexes under their own names, grants, table
 * options, owner and persistence. Views over the tables and functions typed
 * by their rows are re-pointed at the copies by the swap. Anything else on a
 * read model (foreign keys, triggers, row security, column grants) stops the
 * rebuild before it starts rather than being lost.
 */
export const SHADOW_SCHEMA = 'kl_rebuild';
const RETIRED_SCHEMA = 'kl_retired';
const CHECKPOINTS = 'kl_checkpoints';

/** A read model's catalog entry, as the statements below need it. */
interface LiveTable {
  name: string;
  oid: number;
}

/**
 * Empty copies of `tables` and of the checkpoint table in the shadow schema,
 * replacing whatever an interrupted rebuild left there. Returns the schema
 * the live tables are in (the first of the search_path, as for migrations).
 */
export async function createShadowTables(db: Database, tables: readonly string[]): Promise<string> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<{ live: string }>('SELECT current_schema() AS live');
    const live = rows[0].live;
    await tx.query(`DROP SCHEMA IF EXISTS ${SHADOW_SCHEMA} CASCADE`);
    await tx.query(`CREATE SCHEMA ${SHADOW_SCHEMA}`);
    // Catalog functions print every name schema-qualified under this path,
    // so the definitions below can be re-aimed by replacing the schema.
    await tx.query(`SELECT set_config('search_path', 'pg_catalog', true)`);
    for (const table of await liveTables(tx, live, tables)) {
      await refuseUnsupported(tx, table);
      for (const statement of await copyStatements(tx, live, table)) await tx.query(statement);
    }
    await tx.query(
      `CREATE TABLE ${SHADOW_SCHEMA}.${CHECKPOINTS}
         (LIKE ${ident(live)}.${CHECKPOINTS} INCLUDING ALL)`,
    );
    return live;
  });
}

/** Points the rest of `tx` at the shadow copies. */
export async function useShadowTables(tx: Queryable, live: string): Promise<void> {
  await tx.query(`SELECT set_config('search_path', $1, true)`, [
    `${SHADOW_SCHEMA}, ${ident(live)}`,
  ]);
}

export async function dropShadowTables(db: Database): Promise<void> {
  await db.query(`DROP SCHEMA IF EXISTS ${SHADOW_SCHEMA} CASCADE`);
}

/**
 * In `tx`, which must hold every projector's lock and have caught the copies
 * up: the copies replace the live tables, views over them are re-pointed
 * (CREATE OR REPLACE keeps each view, its grants and whatever uses it),
 * functions typed by their rows are re-created with their grants, and the
 * projectors' checkpoints become the copies'. Readers wait only while this
 * runs; if a table cannot be taken within `lockTimeoutMs` (a long query
 * holds it), it throws lock_not_available (55P03) and changes nothing, and
 * the caller tries again later, instead of queueing every reader behind it.
 */
export async function swapInShadowTables(
  tx: Queryable,
  live: string,
  tables: readonly string[],
  projections: readonly string[],
  lockTimeoutMs: number,
): Promise<void> {
  // View and function definitions print live names unqualified under this
  // path, so that run again after the move they name the copies.
  await tx.query(`SELECT set_config('search_path', $1, true)`, [ident(live)]);
  const current = await liveTables(tx, live, tables);
  const oids = current.map((t) => t.oid);
  const views = await dependentViews(tx, oids);
  const functions = await dependentFunctions(tx, oids);

  await tx.query(`SELECT set_config('lock_timeout', $1, true)`, [`${lockTimeoutMs}ms`]);
  const locked = [...current.map((t) => qualified(live, t.name)), ...views.map((v) => v.name)];
  if (locked.length) await tx.query(`LOCK TABLE ${locked.join(', ')} IN ACCESS EXCLUSIVE MODE`);

  for (const f of functions) await tx.query(`DROP FUNCTION ${f.signature}`);
  await tx.query(`CREATE SCHEMA ${RETIRED_SCHEMA}`);
  for (const t of current) {
    await tx.query(`ALTER TABLE ${qualified(live, t.name)} SET SCHEMA ${RETIRED_SCHEMA}`);
    await tx.query(`ALTER TABLE ${qualified(SHADOW_SCHEMA, t.name)} SET SCHEMA ${ident(live)}`);
  }
  for (const v of views) await tx.query(v.replace);
  for (const f of functions) for (const statement of f.create) await tx.query(statement);
  // Nothing may still use an old table: no CASCADE, so a missed dependant
  // fails the swap (and the rebuild) instead of vanishing.
  for (const t of current) await tx.query(`DROP TABLE ${qualified(RETIRED_SCHEMA, t.name)}`);
  await tx.query(`DROP SCHEMA ${RETIRED_SCHEMA}`);

  const checkpoints = qualified(live, CHECKPOINTS);
  await tx.query(`DELETE FROM ${checkpoints} WHERE projection = ANY($1)`, [projections]);
  await tx.query(
    `INSERT INTO ${checkpoints}
     SELECT * FROM ${SHADOW_SCHEMA}.${CHECKPOINTS} WHERE projection = ANY($1)`,
    [projections],
  );
  await tx.query(`DROP SCHEMA ${SHADOW_SCHEMA} CASCADE`);
}

async function liveTables(
  tx: Queryable,
  live: string,
  tables: readonly string[],
): Promise<LiveTable[]> {
  const { rows } = await tx.query<{ name: string; oid: number | null }>(
    `SELECT t.name, to_regclass(format('%I.%I', $1::text, t.name))::oid::int AS oid
       FROM unnest($2::text[]) WITH ORDINALITY AS t(name, ord) ORDER BY t.ord`,
    [live, tables],
  );
  return rows.map((r) => {
    if (r.oid === null) throw new Error(`read model ${live}.${r.name} does not exist`);
    return { name: r.name, oid: r.oid };
  });
}

async function refuseUnsupported(tx: Queryable, table: LiveTable): Promise<void> {
  const { rows } = await tx.query<{ what: string }>(
    `SELECT 'a foreign key' AS what FROM pg_constraint
      WHERE contype = 'f' AND (conrelid = $1 OR confrelid = $1)
     UNION ALL
     SELECT 'a trigger' FROM pg_trigger WHERE tgrelid = $1 AND NOT tgisinternal
     UNION ALL
     SELECT 'row level security' FROM pg_class
      WHERE oid = $1 AND (relrowsecurity OR EXISTS (SELECT 1 FROM pg_policy WHERE polrelid = $1))
     UNION ALL
     SELECT 'column grants' FROM pg_attribute WHERE attrelid = $1 AND attacl IS NOT NULL
     LIMIT 1`,
    [table.oid],
  );
  if (rows.length) {
    throw new Error(
      `read model ${table.name} has ${rows[0].what}, which a rebuild cannot carry over ` +
        '(src/projections/shadow-tables.ts)',
    );
  }
}

/** The statements that create `table`'s shadow copy (search_path is pg_catalog). */
async function copyStatements(tx: Queryable, live: string, table: LiveTable): Promise<string[]> {
  const { rows } = await tx.query<{ statement: string | null; ord: number }>(
    `WITH t AS (SELECT format('%I.%I', $2::text, c.relname) AS shadow, c.* FROM pg_class c
                 WHERE c.oid = $1)
     SELECT format('CREATE TABLE %s (LIKE %s INCLUDING ALL EXCLUDING INDEXES)',
                   t.shadow, $1::regclass) AS statement, 0 AS ord FROM t
     UNION ALL
     -- keys and unique/exclusion constraints, which bring their indexes
     SELECT format('ALTER TABLE %s ADD CONSTRAINT %I %s', t.shadow, k.conname,
                   pg_get_constraintdef(k.oid)), 1
       FROM t JOIN pg_constraint k ON k.conrelid = t.oid AND k.contype IN ('p', 'u', 'x')
     UNION ALL
     -- every other index, under its own name (names are per schema)
     SELECT nullif(replace(pg_get_indexdef(i.indexrelid),
                           format(' ON %s USING ', $1::regclass),
                           format(' ON %s USING ', t.shadow)),
                   pg_get_indexdef(i.indexrelid)), 2
       FROM t JOIN pg_index i ON i.indrelid = t.oid
      WHERE NOT EXISTS (SELECT 1 FROM pg_constraint k
                         WHERE k.conrelid = t.oid AND k.conindid = i.indexrelid)
     UNION ALL
     SELECT format('GRANT %s ON %s TO %s%s', a.privilege_type, t.shadow,
                   CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END,
                   CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END), 3
       -- the owner's own entries too: an ACL made explicit by a REVOKE stays explicit
      FROM t, aclexplode(t.relacl) a
     UNION ALL
     SELECT format('ALTER TABLE %s SET (%s)', t.shadow, array_to_string(t.reloptions, ', ')), 4
       FROM t WHERE t.reloptions IS NOT NULL
     UNION ALL
     SELECT format('COMMENT ON TABLE %s IS %L', t.shadow, obj_description(t.oid, 'pg_class')), 4
       FROM t WHERE obj_description(t.oid, 'pg_class') IS NOT NULL
     UNION ALL
     SELECT format('ALTER TABLE %s SET UNLOGGED', t.shadow), 4 FROM t WHERE t.relpersistence = 'u'
     UNION ALL
     SELECT format('ALTER TABLE %s OWNER TO %I', t.shadow, pg_get_userbyid(t.relowner)), 4
       FROM t WHERE t.relowner <> (SELECT oid FROM pg_roles WHERE rolname = current_user)
     ORDER BY 2, 1`,
    [table.oid, SHADOW_SCHEMA],
  );
  return rows.map((r) => {
    // A definition the schema could not be swapped in would build the index
    // on the live table.
    if (r.statement === null) throw new Error(`cannot copy an index of ${live}.${table.name}`);
    return r.statement;
  });
}

async function dependentViews(
  tx: Queryable,
  tables: number[],
): Promise<{ name: string; replace: string }[]> {
  const { rows } = await tx.query<{ name: string; kind: string; replace: string }>(
    `SELECT DISTINCT v.oid::regclass::text AS name, v.relkind AS kind,
            format('CREATE OR REPLACE VIEW %s%s AS %s', v.oid::regclass,
                   CASE WHEN v.reloptions IS NULL THEN ''
                        ELSE format(' WITH (%s)', array_to_string(v.reloptions, ', ')) END,
                   pg_get_viewdef(v.oid)) AS replace
       FROM pg_depend d
       JOIN pg_rewrite r ON r.oid = d.objid
       JOIN pg_class v ON v.oid = r.ev_class
      WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
        AND d.refobjid = ANY($1::oid[]) AND v.oid <> ALL($1::oid[])
      ORDER BY 1`,
    [tables],
  );
  for (const v of rows) {
    if (v.kind !== 'v') throw new Error(`${v.name} depends on a read model and is not a view`);
  }
  return rows;
}

/** Functions whose signature uses a table's row type (or whose body is bound to a table). */
async function dependentFunctions(
  tx: Queryable,
  tables: number[],
): Promise<{ signature: string; create: string[] }[]> {
  const { rows } = await tx.query<{ signature: string; create: string[] }>(
    `WITH f AS (
       SELECT DISTINCT p.oid,
              format('%I.%I(%s)', n.nspname, p.proname, pg_get_function_identity_arguments(p.oid))
                AS signature
         FROM pg_depend d
         JOIN pg_proc p ON p.oid = d.objid
         JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE d.classid = 'pg_proc'::regclass
          AND ((d.refclassid = 'pg_class'::regclass AND d.refobjid = ANY($1::oid[]))
            OR (d.refclassid = 'pg_type'::regclass AND d.refobjid IN (
                  SELECT ty.oid FROM pg_type ty WHERE ty.typrelid = ANY($1::oid[])
                  UNION ALL
                  SELECT ty.typarray FROM pg_type ty WHERE ty.typrelid = ANY($1::oid[]))))
     )
     SELECT f.signature,
            array_remove(ARRAY[pg_get_functiondef(f.oid)]
              -- a function's default ACL lets PUBLIC execute; keep it exactly as it was
              || CASE WHEN p.proacl IS NULL
                        OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) a WHERE a.grantee = 0)
                      THEN NULL ELSE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.signature) END
              || ARRAY(SELECT format('GRANT %s ON FUNCTION %s TO %I%s', a.privilege_type,
                                     f.signature, pg_get_userbyid(a.grantee),
                                     CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
                         FROM aclexplode(p.proacl) a
                        WHERE a.grantee NOT IN (0, p.proowner))
              || CASE WHEN obj_description(f.oid, 'pg_proc') IS NULL THEN NULL
                      ELSE format('COMMENT ON FUNCTION %s IS %L', f.signature,
                                  obj_description(f.oid, 'pg_proc')) END
              || CASE WHEN p.proowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)
                      THEN NULL
                      ELSE format('ALTER FUNCTION %s OWNER TO %I', f.signature,
                                  pg_get_userbyid(p.proowner)) END,
              NULL) AS create
       FROM f JOIN pg_proc p ON p.oid = f.oid
      ORDER BY 1`,
    [tables],
  );
  return rows;
}

function ident(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function qualified(schema: string, name: string): string {
  return `${ident(schema)}.${ident(name)}`;
}
