import { LOG_START, RecordedEvent } from '../../src/domain/shared/event';
import type { Database } from '../../src/infrastructure/postgres/database';
import type { Projector } from '../../src/projections/projector';
import {
  createShadowTables,
  dropShadowTables,
  SHADOW_SCHEMA,
  useShadowTables,
} from '../../src/projections/shadow-tables';
import type { StateHarness } from './state-harness';
import { wholeLog } from './whole-log';

/**
 * For specs that apply one projector's batches by hand: the same events one
 * at a time or in one batch must leave the same rows.
 */

type Tx = Parameters<Projector['apply']>[1];

/** Every row of each table as its row text (json columns hold NUL, which jsonb refuses), sorted. */
export async function tableRows(db: Database, tables: readonly string[]): Promise<string[][]> {
  const out: string[][] = [];
  for (const table of tables) {
    const rows = await db.query<{ r: string }>(`SELECT t::text AS r FROM ${table} t ORDER BY 1`);
    out.push(rows.map((row) => row.r));
  }
  return out;
}

/** The log's events of the types `projector` handles, with their data: the whole log as it stands. */
export async function handledEvents(
  h: StateHarness,
  projector: Projector,
): Promise<RecordedEvent[]> {
  const handles = projector.handles;
  const log = await wholeLog(h.events, () => h.events.readAll(LOG_START, 100_000, handles));
  return log.filter((e) => handles.includes(e.type));
}

/** The projector's tables after `apply` ran, in one transaction, against empty copies of them. */
export async function appliedToEmptyCopies(
  db: Database,
  projector: Projector,
  apply: (tx: Tx) => Promise<void>,
): Promise<string[][]> {
  await dropShadowTables(db);
  const live = await createShadowTables(db, projector.tables);
  await db.transaction(async (tx) => {
    await useShadowTables(tx, live);
    await apply(tx);
  });
  return shadowRows(db, projector);
}

/** The rows of the projector's empty copies (see appliedToEmptyCopies). */
export function shadowRows(db: Database, projector: Projector): Promise<string[][]> {
  return tableRows(
    db,
    projector.tables.map((t) => `${SHADOW_SCHEMA}.${t}`),
  );
}

/** `tx`, recording the text of every statement sent through it into `statements`. */
export function recordingStatements(tx: Tx, statements: string[]): Tx {
  return {
    query: (q: unknown, ...rest: unknown[]) => {
      statements.push(typeof q === 'string' ? q : (q as { text: string }).text);
      return (tx.query as (...args: unknown[]) => unknown)(q, ...rest);
    },
  } as Tx;
}
