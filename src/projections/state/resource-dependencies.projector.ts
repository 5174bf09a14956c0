import type { RecordedEvent } from '../../domain/shared/event';
import { LifecycleOpened, StateEventType } from '../../domain/state';
import type { Queryable } from '../../infrastructure/postgres/database';
import { jsonbText } from '../../infrastructure/postgres/jsonb-text';
import { copyRows } from '../../infrastructure/postgres/copy-rows';
import { Projector } from '../projector';
import { ResourceAddresses } from './lifecycle-row';
import { cellField, COPY_ROWS, UNIQUE_VIOLATION } from './resource-lifecycles.projector';
import { asStateEvent } from './state-event';

const EDGE_COLUMNS = [
  'state_id',
  'from_address',
  'from_resource_address',
  'to_address',
  'create_version',
  'create_serial',
] as const;

interface Closing {
  state_id: string;
  address: string;
  version: number;
  serial: number;
}

/** A lifecycle opened: its event's data and the resource address it belongs to. */
interface Opening {
  data: LifecycleOpened['data'];
  resourceAddress: string;
}

/** The targets an opened lifecycle declares, each once. */
function targetsOf(o: Opening): Set<string> {
  return new Set(o.data.instance.dependencies ?? []);
}

/**
 * `resource_dependencies`: one row per dependency edge a lifecycle declares,
 * living as long as its lifecycle. Its own projector, beside the lifecycles
 * (`resources`), so that PostgreSQL writes the two on two connections at once:
 * a first commit of 20,000 instances is 20,000 lifecycles and 60,000 edges,
 * and one after the other on one connection they were the longest wait of
 * the commit. Consecutive opens (and closes) are one statement each, flushed
 * in event order; idempotent as the lifecycles: opens ignore an existing
 * (from_address, to_address, create_version), closes only touch edges still
 * open and created before the closing version.
 */
@Projector()
export class ResourceDependenciesProjector implements Projector {
  readonly name = 'state-resource-dependencies';
  readonly handles = [StateEventType.LifecycleOpened, StateEventType.LifecycleClosed];
  readonly tables = ['resource_dependencies'];

  private readonly addresses = new ResourceAddresses();

  async apply(events: RecordedEvent[], tx: Queryable): Promise<void> {
    let opened: Opening[] = [];
    let closed: Closing[] = [];
    const flush = async () => {
      if (closed.length) await this.close(tx, closed);
      if (opened.length) await this.open(tx, opened);
      opened = [];
      closed = [];
    };
    for (const recorded of events) {
      const event = asStateEvent(recorded);
      if (event === null) continue;
      if (event.type === 'LifecycleClosed') {
        if (opened.length) await flush();
        closed.push({
          state_id: event.data.stateId,
          address: event.data.address,
          version: event.data.version,
          serial: event.data.serial,
        });
      } else if (event.type === 'LifecycleOpened') {
        // Edges are made as they are written (see `open`).
        opened.push({ data: event.data, resourceAddress: this.addresses.of(event.data.resource) });
      }
    }
    await flush();
  }

  private async close(tx: Queryable, rows: Closing[]): Promise<void> {
    await tx.query(
      `UPDATE resource_dependencies d SET delete_version = c.version, delete_serial = c.serial
         FROM jsonb_to_recordset($1::jsonb)
              AS c(state_id uuid, address text, version integer, serial bigint)
        WHERE d.state_id = c.state_id AND d.from_address = c.address
          AND d.delete_version IS NULL AND d.create_version < c.version`,
      [jsonbText(rows)],
    );
  }

  /**
   * Opens the edges of lifecycles: a big run (a first commit, a replay) with
   * COPY under a savepoint, falling back to the statement below for a
   * redelivered batch (an edge already there), as the lifecycles do. Both
   * write the same rows (resource-lifecycles-copy.int-spec.ts).
   */
  private async open(tx: Queryable, opened: Opening[]): Promise<void> {
    if (opened.length >= COPY_ROWS) {
      await tx.query('SAVEPOINT kl_open_copy');
      try {
        await copyRows(
          tx,
          'resource_dependencies',
          EDGE_COLUMNS,
          (function* () {
            // An opening's edges share every field but the target: encoded once.
            for (const o of opened) {
              const targets = targetsOf(o);
              if (targets.size === 0) continue;
              const d = o.data;
              const state = cellField(d.stateId, false);
              const from = cellField(d.address, false);
              const fromResource = cellField(o.resourceAddress, false);
              const version = cellField(d.version, false);
              const serial = cellField(d.serial, false);
              for (const to of targets) {
                yield [state, from, fromResource, cellField(to, false), version, serial];
              }
            }
          })(),
        );
        await tx.query('RELEASE SAVEPOINT kl_open_copy');
        return;
      } catch (err) {
        if ((err as { code?: unknown }).code !== UNIQUE_VIOLATION) throw err;
        await tx.query('ROLLBACK TO SAVEPOINT kl_open_copy');
      }
    }
    const edges = opened.flatMap((o) =>
      [...targetsOf(o)].map((to) => ({
        state_id: o.data.stateId,
        from_address: o.data.address,
        from_resource_address: o.resourceAddress,
        to_address: to,
        create_version: o.data.version,
        create_serial: o.data.serial,
      })),
    );
    if (edges.length === 0) return;
    await tx.query(
      `INSERT INTO resource_dependencies
         (state_id, from_address, from_resource_address, to_address, create_version, create_serial)
       SELECT state_id, from_address, from_resource_address, to_address, create_version,
              create_serial
         FROM jsonb_to_recordset($1::jsonb) AS e(state_id uuid, from_address text,
              from_resource_address text,
              to_address text, create_version integer, create_serial bigint)
       ON CONFLICT (state_id, from_address, to_address, create_version) DO NOTHING`,
      [jsonbText(edges)],
    );
  }
}
