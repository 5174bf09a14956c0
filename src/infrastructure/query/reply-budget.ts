import type { PoolClient } from 'pg';
import type { Duplex } from 'node:stream';
import { DomainError } from '../../domain/shared/domain-error';

export const QUERY_TOO_LARGE = 'QUERY.TOO_LARGE';

/** What node-postgres keeps of a client's connection (not in its typings). */
interface WithConnection {
  connection?: { stream?: Duplex };
}

export interface ReplyBudget {
  /** The refusal, once PostgreSQL sent more than the budget; null until then. */
  readonly exceeded: DomainError | null;
  /** Stops counting (the statement is over). */
  end(): void;
}

/**
 * Bounds what PostgreSQL may send on `client` for one user statement (rows,
 * notices, an error's text): once more than `limit` bytes arrived, the
 * connection is closed, before node-postgres has assembled the message that
 * went over. node-postgres keeps each message whole in memory and then turns
 * its fields into strings, so without this a single value PostgreSQL can
 * produce (`repeat('x', 600000000)`: up to 1 GB) would be held whole, and one
 * over V8's longest string (about 512 MiB) throws in the parser's socket
 * handler, which nothing can catch: the process ends. The connection is
 * closed, not the statement cancelled: what it had sent is lost anyway, and
 * its backend ends as it finds the socket gone. Counted from the socket's
 * own `data` events, ahead of the parser's, so the budget holds whatever the
 * statement is.
 */
export function replyBudget(client: PoolClient, limit: number): ReplyBudget {
  const stream = (client as unknown as WithConnection).connection?.stream;
  if (stream === undefined) throw new Error('node-postgres client without a connection stream');
  let received = 0;
  let exceeded: DomainError | null = null;
  const count = (chunk: Buffer) => {
    received += chunk.length;
    if (received <= limit || exceeded !== null) return;
    exceeded = new DomainError(
      QUERY_TOO_LARGE,
      `the answer is larger than ${limit / 2 ** 20} MiB (rows, notices or an error's text): ` +
        'select fewer rows (LIMIT, max_rows) or narrower values (left(…), octet_length(…))',
      { limit },
    );
    stream.destroy(exceeded);
  };
  stream.prependListener('data', count);
  return {
    get exceeded() {
      return exceeded;
    },
    end: () => void stream.off('data', count),
  };
}
