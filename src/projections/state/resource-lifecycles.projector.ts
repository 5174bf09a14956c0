import type { RecordedEvent } from '../../domain/shared/event';
import { ApplyCommitted, StateEventType } from '../../domain/state';
import type { Queryable } from '../../infrastructure/postgres/database';
import { Projector } from '../projector';
import { ResourceAddresses, ResourceRow, resourceRow } from './lifecycle-row';
import type { JsonValue } from '../../domain/terraform';
import {
  applyLifecycleRuns,
  closeRows,
  COPY_ROWS,
  copyUnlessPresent,
  Opening,
} from './lifecycle-runs';
import { jsonbText, jsonbTextOf, textParam } from '../../infrastructure/postgres/jsonb-text';
import { prepared } from '../../infrastructure/postgres/prepared-statement';
import {
  BinaryField,
  binaryBool,
  binaryInt4,
  binaryInt8,
  binaryJsonb,
  binaryText,
  binaryUuid,
  copyBinaryRows,
} from '../../infrastructure/postgres/copy-rows';
import { bigNumberText, isBigNumber } from '../../domain/terraform/lossless-json';
import { InstanceTexts, instanceTexts } from './instance-texts';

const RESOURCE_COLUMNS = `state_id uuid, address text, resource_address text, mode text, type text,
  name text, module_path text, index_key text, deposed_key text, provider text, each_mode text,
  schema_version integer, attributes jsonb, sensitive_attributes jsonb, private text,
  dependencies jsonb, status text, create_before_destroy boolean, extra jsonb,
  attributes_hash text, create_version integer, create_serial bigint`;

const RESOURCE_COLUMN_LIST = RESOURCE_COLUMNS.split(',').map((c) => c.trim().split(/\s+/));
const RESOURCE_NAMES = RESOURCE_COLUMN_LIST.map(([name]) => name).join(', ');

/**
 * A value as a field of COPY's binary format, read the way
 * json_to_recordset reads the same value out of `jsonbText` (the INSERT
 * path): jsonb columns get its JSON text, text columns a string as it is and
 * anything else as its JSON text, with NUL and lone surrogates made U+FFFD
 * in both; integers, booleans and the uuid in their binary forms.
 */
function cellField(value: JsonValue | undefined, type: string): BinaryField {
  if (value === undefined || value === null) return null;
  switch (type) {
    case 'jsonb':
      return binaryJsonb(jsonbText(value));
    case 'integer':
      return binaryInt4(integerOf(value));
    case 'bigint':
      return binaryInt8(integerOf(value));
    case 'boolean':
      if (typeof value !== 'boolean') throw new TypeError(`not a boolean: ${jsonbText(value)}`);
      return binaryBool(value);
    case 'uuid':
      return binaryUuid(String(value));
  }
  // A number or boolean's JSON text is its string (parsed JSON holds only finite numbers).
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (typeof value !== 'string') return jsonbText(value);
  return isBigNumber(value) ? bigNumberText(value) : textParam(value);
}

/** An integer column's value: a number, or its decimal text (as PostgreSQL's text input takes it). */
function integerOf(value: JsonValue): number | bigint {
  if (typeof value === 'number') return value;
  const text = typeof value === 'string' ? (isBigNumber(value) ? bigNumberText(value) : value) : '';
  if (!/^\s*[-+]?\d+\s*$/.test(text)) throw new TypeError(`not an integer: ${jsonbText(value)}`);
  return BigInt(text.trim());
}

/** Columns whose value is usually the row before's (see RESOURCE_CELLS). */
const REPEATED = new Set([
  'state_id',
  'resource_address',
  'mode',
  'type',
  'name',
  'module_path',
  'provider',
  'each_mode',
  'schema_version',
  'create_version',
  'create_serial',
]);

const RESOURCE_CELLS: ((row: ResourceRow, texts: InstanceTexts) => BinaryField)[] = [
  ...RESOURCE_COLUMN_LIST.map(([name, type]) => {
    if (name === 'attributes' || name === 'sensitive_attributes' || name === 'dependencies') {
      return (row: ResourceRow, texts: InstanceTexts) => {
        const value = row[name];
        const text = texts[name];
        // The row's member is the instance's own (resourceRow): its text is at hand.
        return value === undefined || value === null || text === undefined
          ? cellField(value, type)
          : binaryJsonb(jsonbTextOf(text));
      };
    }
    if (REPEATED.has(name)) {
      // A batch's rows mostly share their state, versions and serials (a
      // commit's), consecutive rows their resource, and schema versions
      // repeat: each value's bytes once, copied into the stream as they are.
      let last: [JsonValue | undefined, BinaryField] = [undefined, null];
      return (row: ResourceRow) => {
        const value = row[name];
        if (value !== last[0]) {
          const field = cellField(value, type);
          last = [value, typeof field === 'string' ? binaryText(field) : field];
        }
        return last[1];
      };
    }
    return (row: ResourceRow) => cellField(row[name], type);
  }),
  // json columns keep the exact text (see resourceParams); json's binary form is its text.
  (_row, texts) => texts.instance,
  (row) => (row.resource_extra === undefined ? null : JSON.stringify(row.resource_extra)),
];

/**
 * `instance` and `resource_extra` go to json columns that keep their exact
 * text (old versions are rebuilt from them), so they travel as JSON lines,
 * one value per line ('' for none): PostgreSQL's json_to_recordset
 * de-escapes values and refuses a NUL character, and a json[] parameter
 * would have node-pg escape every quote. JSON.stringify never writes a raw
 * newline. Everything else lands in queryable columns, made NUL-free.
 */
function resourceParams(rows: ResourceRow[]): [string, string, string] {
  const rest = rows.map(({ instance: _i, resource_extra: _r, ...columns }) => columns);
  return [
    jsonbText(rest),
    rows.map((r) => JSON.stringify(r.instance)).join('\n'),
    rows
      .map((r) => (r.resource_extra === undefined ? '' : JSON.stringify(r.resource_extra)))
      .join('\n'),
  ];
}

/** The lifecycles' projector, by name (its checkpoint's). */
export const RESOURCE_LIFECYCLES_PROJECTOR = 'state-resource-lifecycles';

/**
 * `resources` and `outputs`. A first commit of a big state is thousands of
 * LifecycleOpened events, so consecutive opens (and closes) are written as
 * one statement each; the decider emits a commit's closes before its opens,
 * which is also the order they are flushed in. Idempotent: opens ignore an
 * existing (address, create_version), closes only touch lifecycles still open
 * and created before the closing version. The lifecycles' dependency edges
 * are read from their `dependencies` (the view resource_dependencies,
 * migration 035).
 */
@Projector()
export class ResourceLifecyclesProjector implements Projector {
  readonly name = RESOURCE_LIFECYCLES_PROJECTOR;
  readonly handles = [
    StateEventType.ApplyCommitted,
    StateEventType.LifecycleOpened,
    StateEventType.LifecycleClosed,
  ];
  readonly tables = ['resources', 'outputs'];
  /**
   * `current_resources` joins `states`. A new database's `states` has never
   * been analyzed (it changes a row per commit: autovacuum takes it after
   * about 50), and the planner then takes it for hundreds of rows, so that a
   * state's 20,000 live resources look like 45: the inventories sorted them
   * all for a GroupAggregate and checked the reader's grant on every row,
   * and the blast radius compared every reached resource with every row
   * (docs/performance-history.md, "The seed queries' round trip (wave 25)").
   */
  readonly analyzeWith = ['states'];

  private readonly addresses = new ResourceAddresses();

  /**
   * A commit's opens long enough for COPY: their rows need no position
   * (versions and serials are the events' own), and they are the longest
   * write a first commit's answer waits for.
   */
  applyBeforeCommit(events: readonly RecordedEvent[]): boolean {
    let opens = 0;
    for (const e of events) if (e.type === StateEventType.LifecycleOpened) opens++;
    return opens >= COPY_ROWS;
  }

  apply(events: RecordedEvent[], tx: Queryable): Promise<void> {
    return applyLifecycleRuns(events, this.addresses, {
      close: (rows) => closeRows(tx, rows),
      open: (rows) => this.open(tx, rows),
      committed: (data) => this.projectOutputs(tx, data),
    });
  }

  /**
   * Opens lifecycles: a big run (a first commit, a replay) with COPY, the
   * statements below for a short one or a redelivered batch (a key already
   * there: copyUnlessPresent). Both write the same rows
   * (resource-lifecycles-copy.int-spec.ts).
   */
  private async open(tx: Queryable, opened: Opening[]): Promise<void> {
    const copied =
      opened.length >= COPY_ROWS &&
      (await copyUnlessPresent(tx, (first) =>
        copyBinaryRows(
          tx,
          'resources',
          [...RESOURCE_COLUMN_LIST.map(([name]) => name), 'instance', 'resource_extra'],
          (function* () {
            for (const o of opened) {
              const row = resourceRow(o.data, o.resourceAddress);
              const texts = instanceTexts(o.data.instance);
              yield RESOURCE_CELLS.map((cell) => cell(row, texts));
            }
          })(),
          first,
        ),
      ));
    if (copied) return;
    await this.insert(
      tx,
      opened.map((o) => resourceRow(o.data, o.resourceAddress)),
    );
  }

  private async insert(tx: Queryable, rows: ResourceRow[]): Promise<void> {
    await tx.query(
      prepared(
        `INSERT INTO resources (${RESOURCE_NAMES}, instance, resource_extra)
       SELECT ${RESOURCE_NAMES}, x.instance::json, nullif(x.resource_extra, '')::json
         FROM ROWS FROM (json_to_recordset($1::json) AS (${RESOURCE_COLUMNS}))
              WITH ORDINALITY AS r(${RESOURCE_NAMES}, ord)
         JOIN unnest(string_to_array($2, chr(10)), string_to_array($3, chr(10)))
              WITH ORDINALITY AS x(instance, resource_extra, ord)
           USING (ord)
       ON CONFLICT (state_id, address, create_version) DO NOTHING`,
        resourceParams(rows),
      ),
    );
  }

  /**
   * The decider names the outputs each version closed and opened: closes
   * touch only rows still open and created before the version, opens ignore
   * an existing (name, version), so a redelivered commit changes nothing.
   */
  private async projectOutputs(tx: Queryable, d: ApplyCommitted['data']): Promise<void> {
    if (d.outputChanges === undefined) return this.compareOutputs(tx, d);
    const { closed, opened } = d.outputChanges;
    if (closed.length) {
      await tx.query(
        `UPDATE outputs SET delete_version = $3, delete_serial = $4
          WHERE state_id = $1 AND name = ANY($2) AND delete_version IS NULL
            AND create_version < $3`,
        [d.stateId, closed.map(textParam), d.version, d.serial],
      );
    }
    if (opened.length) {
      await tx.query(
        `INSERT INTO outputs (state_id, name, value, type, sensitive, create_version, create_serial)
         SELECT $1, key, value -> 'value', value -> 'type',
                coalesce((value ->> 'sensitive')::boolean, false), $4, $5
           FROM jsonb_each($2::jsonb) WHERE key = ANY($3)
         ON CONFLICT (state_id, name, create_version) DO NOTHING`,
        [d.stateId, jsonbText(d.outputs), opened.map(textParam), d.version, d.serial],
      );
    }
  }

  /**
   * ApplyCommitted events written before the decider named the changed
   * outputs: each commit's outputs are compared with the open rows. An
   * output whose value, type or sensitivity differs (or that is gone) is
   * closed; one without an open row is opened. A commit older than what the
   * rows already record is a redelivery and is skipped, so it can never
   * reopen superseded values.
   */
  private async compareOutputs(tx: Queryable, d: ApplyCommitted['data']): Promise<void> {
    const { rows } = await tx.query<{ newer: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM outputs WHERE state_id = $1
                 AND (create_version > $2 OR delete_version > $2)) AS newer`,
      [d.stateId, d.version],
    );
    if (rows[0].newer) return;
    const next = `(SELECT key AS name, value -> 'value' AS value, value -> 'type' AS type,
                          coalesce((value ->> 'sensitive')::boolean, false) AS sensitive
                     FROM jsonb_each($2::jsonb))`;
    const params = [d.stateId, jsonbText(d.outputs), d.version, d.serial];
    await tx.query(
      `UPDATE outputs o SET delete_version = $3, delete_serial = $4
        WHERE o.state_id = $1 AND o.delete_version IS NULL AND o.create_version < $3
          AND NOT EXISTS (SELECT 1 FROM ${next} n
                           WHERE n.name = o.name AND n.value = o.value
                             AND n.type IS NOT DISTINCT FROM o.type
                             AND n.sensitive = o.sensitive)`,
      params,
    );
    await tx.query(
      `INSERT INTO outputs (state_id, name, value, type, sensitive, create_version, create_serial)
       SELECT $1, n.name, n.value, n.type, n.sensitive, $3, $4 FROM ${next} n
        WHERE NOT EXISTS (SELECT 1 FROM outputs o
                           WHERE o.state_id = $1 AND o.name = n.name AND o.delete_version IS NULL)
       ON CONFLICT (state_id, name, create_version) DO NOTHING`,
      params,
    );
  }
}
