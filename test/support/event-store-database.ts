import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { createTestDatabase, TestDatabase } from './test-database';

/** A migrated test database and a notifier on it: what a PostgresEventStore needs. */
export interface EventStoreDatabase {
  t: TestDatabase;
  notifier: Notifier;
  close(): Promise<void>;
}

export async function openEventStoreDatabase(prefix?: string): Promise<EventStoreDatabase> {
  const t = await createTestDatabase(prefix);
  const notifier = new Notifier(t.url);
  return {
    t,
    notifier,
    close: async () => {
      await notifier.close();
      await t.drop();
    },
  };
}

/**
 * The same for the tests of one `describe`: opened in its beforeAll, closed in
 * its afterAll. Read `t` and `notifier` inside the tests, not when declaring them.
 */
export function useEventStoreDatabase(prefix?: string): Omit<EventStoreDatabase, 'close'> {
  let opened: EventStoreDatabase | undefined;
  beforeAll(async () => {
    opened = await openEventStoreDatabase(prefix);
  });
  afterAll(async () => {
    await opened?.close();
  });
  const get = () => {
    if (!opened) throw new Error('the event-store database is opened in beforeAll');
    return opened;
  };
  return {
    get t() {
      return get().t;
    },
    get notifier() {
      return get().notifier;
    },
  };
}
