import type { Database } from '../../src/infrastructure/postgres/database';

/**
 * Everything PostgreSQL knows about the definitions in the current schema
 * (tables with their columns, defaults, constraints, indexes, grants,
 * options and comments; views; functions), by name and never by oid: equal
 * fingerprints mean a client cannot tell the schemas apart.
 */
export async function schemaFingerprint(db: Database): Promise<unknown> {
  const rows = await db.query<{ fingerprint: unknown }>(
    `WITH acl(oid, items) AS (
       SELECT c.oid, (SELECT jsonb_agg(jsonb_build_array(pg_get_userbyid(a.grantor),
                                        CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                                             ELSE pg_get_userbyid(a.grantee) END,
                                        a.privilege_type, a.is_grantable) ORDER BY 1, 2, 3)
                        FROM aclexplode(c.relacl) a)
         FROM pg_class c
     )
     SELECT jsonb_build_object(
       'relations', (
         SELECT jsonb_object_agg(c.relname, jsonb_build_object(
           'kind', c.relkind,
           'persistence', c.relpersistence,
           'options', c.reloptions,
           'owner', pg_get_userbyid(c.relowner),
           'rowSecurity', c.relrowsecurity,
           'comment', obj_description(c.oid, 'pg_class'),
           'grants', (SELECT items FROM acl WHERE acl.oid = c.oid),
           'view', CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid) END,
           'columns', (
             SELECT jsonb_agg(jsonb_build_array(a.attname, format_type(a.atttypid, a.atttypmod),
                                                a.attnotnull, pg_get_expr(d.adbin, d.adrelid),
                                                a.attidentity, a.attgenerated, a.attstorage,
                                                a.attcompression, a.attcollation::regcollation,
                                                col_description(c.oid, a.attnum), a.attacl)
                              ORDER BY a.attnum)
               FROM pg_attribute a
               LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
              WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
           'constraints', (
             SELECT jsonb_agg(jsonb_build_array(k.conname, k.contype, pg_get_constraintdef(k.oid))
                              ORDER BY k.conname)
               FROM pg_constraint k WHERE k.conrelid = c.oid),
           'indexes', (
             SELECT jsonb_agg(jsonb_build_array(ic.relname, pg_get_indexdef(i.indexrelid),
                                                i.indisprimary, i.indisunique, ic.reloptions)
                              ORDER BY ic.relname)
               FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
              WHERE i.indrelid = c.oid),
           'triggers', (
             SELECT jsonb_agg(t.tgname ORDER BY t.tgname)
               FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal)))
           FROM pg_class c
          WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'v', 'm')),
       'functions', (
         SELECT jsonb_object_agg(p.oid::regprocedure::text, jsonb_build_object(
           'definition', pg_get_functiondef(p.oid),
           'owner', pg_get_userbyid(p.proowner),
           'grants', p.proacl::text[],
           'comment', obj_description(p.oid, 'pg_proc')))
           FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace),
       'schemas', (
         SELECT jsonb_agg(n.nspname ORDER BY n.nspname) FROM pg_namespace n
          WHERE n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema')
     ) AS fingerprint`,
  );
  return rows[0].fingerprint;
}
