import type { EventStore } from '../../src/application/ports/event-store.port';
import type { LogPosition } from '../../src/domain/shared/event';

/**
 * The log as it stands, as `read` (a readAll or readLog from the start)
 * returns it: read again, bounded, until it reaches the log's head. A read's
 * horizon can stop short of the last commit for a moment even after the
 * read models passed it: a transaction of another database on the same
 * server (another test file's) that ends between the horizon's snapshot and
 * its look at pg_stat_activity counts as this database's, as it must.
 */
export async function wholeLog<E extends { position: LogPosition }>(
  store: Pick<EventStore, 'headPosition'>,
  read: () => Promise<E[]>,
): Promise<E[]> {
  const head = (await store.headPosition())?.globalPosition;
  for (let attempt = 0; ; attempt += 1) {
    const events = await read();
    const last = events.at(-1)?.position.globalPosition;
    if (last === head) return events;
    if (attempt === 200)
      throw new Error(`the log's horizon stayed at ${last}, its head is ${head}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
