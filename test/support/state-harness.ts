import { randomUUID } from 'node:crypto';
import { AggregateStore } from '../../src/application/aggregate-store';
import type { CommandContext, LogPosition } from '../../src/domain/shared/event';
import {
  CommitSource,
  fromSnapshot,
  LockInfo,
  STATE_SNAPSHOT_SCHEMA,
  StateAggregate,
  StateCommand,
  stateDecider,
  StateEvent,
  stateStreamId,
  toSnapshot,
  toSnapshotText,
} from '../../src/domain/state';
import { flattenInstances, type StateDocumentV4 } from '../../src/domain/terraform';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { PostgresSnapshotStore } from '../../src/infrastructure/event-store/postgres-snapshot-store';
import type { Database } from '../../src/infrastructure/postgres/database';
import { StateCatalogReadModel } from '../../src/infrastructure/read-models/state-catalog-read-model';
import { StateDocumentReadModel } from '../../src/infrastructure/read-models/state-document-read-model';
import { WrittenChunks } from '../../src/application/state/written-chunks';
import { ProjectionRunner } from '../../src/projections/projection-runner';
import type { Logger } from '../../src/infrastructure/logging/logger';
import type { Projector } from '../../src/projections/projector';
import { applyProjectors } from '../../src/projections/apply';
import { stateProjectors, versionProjections } from '../../src/projections/state';
import { RawStateProjector } from '../../src/projections/state/raw-state.projector';
import type { CacheBudgets } from '../../src/application/bounded-cache';
import { createTestDatabase, quietLogger, TestDatabase } from './test-database';

export const READ_MODEL_TABLES = [
  'states',
  'state_versions',
  'state_locks',
  'resources',
  'resource_dependencies',
  'resource_edges',
  'resource_edge_sources',
  'outputs',
  'raw_state',
  'raw_state_chunks',
  'resource_reservations',
  'reservation_run_info',
  'apply_runs',
] as const;

export function lockInfo(
  id: string,
  who = 'alice@laptop',
  operation = 'OperationTypeApply',
): LockInfo {
  return {
    ID: id,
    Operation: operation,
    Info: '',
    Who: who,
    Version: '1.11.4',
    Created: '2026-11-30T00:00:00Z',
    Path: '',
    FutureField: { kept: [1, 'two'] },
  };
}

/**
 * The real write path of the State aggregate (decider → PostgreSQL event
 * store → projections), with the read-your-writes wait a command handler does.
 */
export class StateHarness {
  readonly events: PostgresEventStore;
  readonly store: AggregateStore<StateCommand, StateAggregate, StateEvent>;
  readonly projectors: Projector[];
  readonly runner: ProjectionRunner;
  readonly documents: StateDocumentReadModel;
  /** The chunks the raw-state projector wrote last, which `documents` serves from, as in kld. */
  readonly written = new WrittenChunks();
  readonly catalog: StateCatalogReadModel;
  private clock = Date.parse('2026-01-01T00:00:00.000Z');
  private ids = 0;

  private constructor(
    readonly t: TestDatabase,
    readonly notifier: Notifier,
  ) {
    this.events = new PostgresEventStore(t.db, notifier);
    this.store = new AggregateStore(this.events, new PostgresSnapshotStore(t.db), stateDecider, {
      ids: { uuid: randomUUID },
      snapshotSchema: STATE_SNAPSHOT_SCHEMA,
      toSnapshot,
      toSnapshotText,
      fromSnapshot,
      snapshotEvery: 7,
    });
    this.projectors = [...stateProjectors(this.events, this.written), ...applyProjectors()];
    this.runner = this.newRunner(this.projectors);
    this.documents = new StateDocumentReadModel(t.db, {
      written: this.written,
      projections: versionProjections(this.runner),
    });
    this.catalog = new StateCatalogReadModel(t.db);
  }

  static async create(): Promise<StateHarness> {
    const t = await createTestDatabase();
    return new StateHarness(t, new Notifier(t.url));
  }

  get db(): Database {
    return this.t.db;
  }

  /**
   * This harness's projectors with a raw-state projector of their own: its
   * document cache within `cache`, the chunks it writes kept in `written`.
   */
  projectorsWithRawState(cache: CacheBudgets, written: WrittenChunks): Projector[] {
    const raw = new RawStateProjector(this.events, { cache }, undefined, written);
    return [...this.projectors.filter((p) => p.name !== raw.name), raw];
  }

  /** Another runner over this harness's log (a replica, a spy projector, a rebuild). */
  newRunner(
    projectors: readonly Projector[],
    options: { logger?: Logger; recheckMs?: number; unloggedReadModels?: boolean } = {},
  ): ProjectionRunner {
    return new ProjectionRunner({
      events: this.events,
      db: this.t.db,
      notifier: this.notifier,
      logger: options.logger ?? quietLogger,
      recheckMs: options.recheckMs,
      unloggedReadModels: options.unloggedReadModels,
    }).register(projectors);
  }

  async close(): Promise<void> {
    await this.store.snapshotsWritten();
    await this.notifier.close();
    await this.t.drop();
  }

  /** The harness's clock, as the Clock port of the use cases. */
  readonly clockPort = { now: () => new Date(this.clock) };

  /** Moves the clock on (a lease running out). */
  advance(seconds: number): void {
    this.clock += seconds * 1000;
  }

  context(actor = 'alice'): CommandContext {
    this.clock += 1000;
    return {
      actor,
      correlationId: `corr-${this.clock}`,
      now: new Date(this.clock).toISOString(),
    };
  }

  newStateId(): string {
    this.ids += 1;
    return `00000000-0000-4000-8000-${this.ids.toString(16).padStart(12, '0')}`;
  }

  /** Appends without waiting for the read models. */
  async append(command: StateCommand): Promise<LogPosition | null> {
    const result = await this.store.handle(
      stateStreamId(command.data.name),
      command,
      command.metadata,
    );
    return result.position;
  }

  async run(command: StateCommand, runner = this.runner): Promise<void> {
    const position = await this.append(command);
    if (position) await runner.waitForPosition(position);
  }

  lock(name: string, id: string, actor = 'alice', operation?: string): Promise<void> {
    return this.run({
      type: 'LockState',
      data: { name, newStateId: this.newStateId(), lockInfo: lockInfo(id, undefined, operation) },
      metadata: this.context(actor),
    });
  }

  unlock(name: string, lockId: string): Promise<void> {
    return this.run({ type: 'UnlockState', data: { name, lockId }, metadata: this.context() });
  }

  forceUnlock(name: string): Promise<void> {
    return this.run({ type: 'ForceUnlockState', data: { name }, metadata: this.context() });
  }

  commitCommand(
    name: string,
    document: StateDocumentV4,
    options: { lockId?: string; source?: CommitSource; actor?: string } = {},
  ): StateCommand {
    return {
      type: 'CommitState',
      data: {
        name,
        newStateId: this.newStateId(),
        document,
        instances: flattenInstances(document),
        lockId: options.lockId,
        source: options.source ?? 'http',
        checksum: `sum-${document.serial}-${this.clock}`,
      },
      metadata: this.context(options.actor),
    };
  }

  commit(
    name: string,
    document: StateDocumentV4,
    options: { lockId?: string; source?: CommitSource; actor?: string } = {},
    runner = this.runner,
  ): Promise<void> {
    return this.run(this.commitCommand(name, document, options), runner);
  }

  delete(name: string): Promise<void> {
    return this.run({ type: 'DeleteState', data: { name }, metadata: this.context() });
  }

  async stateId(name: string): Promise<string> {
    const rows = await this.db.query<{ state_id: string }>(
      'SELECT state_id FROM states WHERE name = $1 AND deleted_at IS NULL',
      [name],
    );
    if (rows.length !== 1) throw new Error(`no live state ${name}`);
    return rows[0].state_id;
  }
}

/** Every row of each table as JSON text, sorted: two snapshots are equal iff the tables are. */
export async function snapshotTables(
  db: Database,
  tables: readonly string[] = READ_MODEL_TABLES,
  exclude: readonly string[] = [],
): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const table of tables) {
    const rows = await db.query<{ r: string }>(
      `SELECT (to_jsonb(t) - $1::text[])::text AS r FROM ${table} t ORDER BY 1`,
      [exclude],
    );
    out[table] = rows.map((row) => row.r);
  }
  return out;
}

export interface TestInstance {
  type?: string;
  name: string;
  module?: string;
  key?: number | string;
  input: string;
  dependsOn?: string[];
}

/** A small v4 document of terraform_data instances (one resource per distinct module/type/name). */
export function testDocument(
  serial: number,
  instances: TestInstance[],
  outputs: StateDocumentV4['outputs'] = {},
  lineage = 'lineage-test',
): StateDocumentV4 {
  const resources = new Map<string, StateDocumentV4['resources'][number]>();
  for (const i of instances) {
    const type = i.type ?? 'terraform_data';
    const id = JSON.stringify([i.module ?? '', type, i.name]);
    let r = resources.get(id);
    if (!r) {
      r = {
        ...(i.module ? { module: i.module } : {}),
        mode: 'managed',
        type,
        name: i.name,
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [],
      };
      resources.set(id, r);
    }
    r.instances.push({
      ...(i.key === undefined ? {} : { index_key: i.key }),
      schema_version: 0,
      attributes: { id: `id-${i.name}-${i.key ?? ''}`, input: { value: i.input, type: 'string' } },
      sensitive_attributes: [],
      ...(i.dependsOn ? { dependencies: i.dependsOn } : {}),
    });
  }
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage,
    outputs,
    resources: [...resources.values()],
    check_results: null,
  };
}
