import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { Database } from '../../src/infrastructure/postgres/database';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { benchEvent } from './events';

/** Appends filler events (a lock's size, a type no projector reads) up to `total` in the log. */
export async function fillLog(
  databaseUrl: string,
  total: number,
): Promise<{ total: number; added: number; ms: number }> {
  const db = new Database(databaseUrl);
  const notifier = new Notifier(databaseUrl);
  try {
    const store = new PostgresEventStore(db, notifier);
    const count = async () =>
      Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM kl_events'))[0].n);
    const before = await count();
    const started = performance.now();
    let added = 0;
    for (let batch = 0; before + added < total; batch++) {
      const n = Math.min(1000, total - before - added);
      const events = Array.from({ length: n }, (_, i) => ({
        ...benchEvent(added + i),
        type: 'BenchFiller',
      }));
      await store.appendToStream(`bench-filler-${batch}`, events, {
        expectedRevision: 'no_stream',
      });
      added += n;
    }
    return { total: await count(), added, ms: performance.now() - started };
  } finally {
    await notifier.close();
    await db.close();
  }
}
