import { LoggedEvent, LogPosition } from '../../domain/shared/event';
import type { EventStore } from '../ports/event-store.port';
import { eventBytes } from './event-size';

/**
 * Pages of the log read once for every consumer catching up at the same
 * place: subscribers that start together from the log's start (or resume
 * from the same position) ask for the same pages, one after another. A page
 * asked for while it is being read waits for that read; a full page read
 * lately is handed out again while it is among the last few kept. Short
 * pages (the head of the log, as of their read) are never kept: a consumer
 * asking later must see what was committed since.
 *
 * The events are shared between consumers, which only read them.
 */
export class SharedPages {
  private readonly reading = new Map<string, Promise<LoggedEvent[]>>();
  /** Full pages kept, oldest first (a Map keeps insertion order). */
  private readonly kept = new Map<string, { page: LoggedEvent[]; bytes: number }>();
  private keptBytes = 0;
  /** Pages read from the store, and pages handed out without a read: for tests and benches. */
  reads = 0;
  shared = 0;

  constructor(
    private readonly store: Pick<EventStore, 'readLog'>,
    private readonly pagesKept: number,
    private readonly bytesKept: number,
  ) {}

  async readLog(from: LogPosition, limit: number): Promise<LoggedEvent[]> {
    const key = `${from.transactionId}:${from.globalPosition}:${limit}`;
    const kept = this.kept.get(key);
    if (kept) {
      this.shared++;
      return kept.page;
    }
    const inFlight = this.reading.get(key);
    if (inFlight) {
      this.shared++;
      return inFlight;
    }
    this.reads++;
    const read = this.store.readLog(from, limit);
    this.reading.set(key, read);
    try {
      const page = await read;
      if (page.length === limit) this.keep(key, page);
      return page;
    } finally {
      this.reading.delete(key);
    }
  }

  private keep(key: string, page: LoggedEvent[]): void {
    let bytes = 0;
    for (const event of page) bytes += eventBytes(event);
    if (bytes > this.bytesKept) return;
    this.kept.set(key, { page, bytes });
    this.keptBytes += bytes;
    while (this.kept.size > this.pagesKept || this.keptBytes > this.bytesKept) {
      const [oldest, { bytes: freed }] = this.kept.entries().next().value as [
        string,
        { page: LoggedEvent[]; bytes: number },
      ];
      this.kept.delete(oldest);
      this.keptBytes -= freed;
    }
  }
}
