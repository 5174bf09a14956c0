import type { RecordedEvent } from '../../domain/shared/event';
import { StateEventType } from '../../domain/state';
import type { Queryable } from '../../infrastructure/postgres/database';
import { jsonbText } from '../../infrastructure/postgres/jsonb-text';
import { copyRows } from '../../infrastructure/postgres/copy-rows';
import { Projector } from '../projector';
import { ResourceAddresses } from './lifecycle-row';
import {
  applyLifecycleRuns,
  closeRows,
  COPY_ROWS,
  copyUnlessPresent,
  Opening,
} from './lifecycle-runs';
import { cellField } from './resource-lifecycles.projector';

const EDGE_COLUMNS = [
  'state_id',
  'from_address',
  'from_resource_address',
  'to_address',
  'create_version',
  'create_serial',
] as const;

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

  apply(events: RecordedEvent[], tx: Queryable): Promise<void> {
    // Edges are made as they are written (see `open`).
    return applyLifecycleRuns(events, this.addresses, {
      close: (rows) => closeRows(tx, 'resource_dependencies', 'from_address', rows),
      open: (rows) => this.open(tx, rows),
    });
  }

  /**
   * Opens the edges of lifecycles: a big run (a first commit, a replay) with
   * COPY under a savepoint, falling back to the statement below for a
   * redelivered batch (an edge already there), as the lifecycles do. Both
   * write the same rows (resource-lifecycles-copy.int-spec.ts).
   */
  private async open(tx: Queryable, opened: Opening[]): Promise<void> {
    const copied =
      opened.length >= COPY_ROWS &&
      (await copyUnlessPresent(tx, () =>
        copyRows(
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
        ),
      ));
    if (copied) return;
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
