import { Module } from '@nestjs/common';
import { EVENT_STORE } from '../application/ports/event-store.port';
import { SNAPSHOT_STORE } from '../application/ports/snapshot-store.port';
import { NOTIFIER, Notifier } from '../infrastructure/event-store/notifier';
import { PostgresEventStore } from '../infrastructure/event-store/postgres-event-store';
import { PostgresSnapshotStore } from '../infrastructure/event-store/postgres-snapshot-store';
import { DATABASE, Database } from '../infrastructure/postgres/database';

/** The event store and aggregate snapshots, bound to their ports. */
@Module({
  providers: [
    {
      provide: EVENT_STORE,
      useFactory: (db: Database, n: Notifier) => new PostgresEventStore(db, n),
      inject: [DATABASE, NOTIFIER],
    },
    {
      provide: SNAPSHOT_STORE,
      useFactory: (db: Database) => new PostgresSnapshotStore(db),
      inject: [DATABASE],
    },
  ],
  exports: [EVENT_STORE, SNAPSHOT_STORE],
})
export class EventStoreModule {}
