import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { connectionOptions } from '../postgres/connection-options';

/** The PostgreSQL role user SQL runs as (migrations/003_query_role.sql). */
export const READER_ROLE = 'kl_reader';

/**
 * The reader's password, derived from the owner's server URL without the
 * database name: every replica (and every database on a shared server)
 * computes the same one without coordination, and it is as secret as the
 * owner's credentials it is keyed on.
 */
export function readerPassword(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  const server = `${url.protocol}//${url.username}:${url.password}@${url.host}`;
  return createHmac('sha256', server).update(`kilolock:${READER_ROLE}:v1`).digest('hex');
}

/** The owner's URL with the reader's credentials: same server, same database. */
export function readerUrl(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  url.username = READER_ROLE;
  url.password = readerPassword(databaseUrl);
  return url.toString();
}

/**
 * Makes the reader's password the derived one. Logging in first avoids
 * rewriting the shared pg_authid row on every start, which would race other
 * replicas ("tuple concurrently updated"); the race that remains on a first
 * start is retried.
 */
export async function ensureReaderPassword(databaseUrl: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    if (await canLogIn(readerUrl(databaseUrl))) return;
    const owner = new Client(connectionOptions(databaseUrl));
    owner.on('error', () => undefined);
    try {
      await owner.connect();
      // A SCRAM verifier, not the password: ALTER ROLE lands in server logs.
      const verifier = scramVerifier(readerPassword(databaseUrl));
      await owner.query(`ALTER ROLE ${READER_ROLE} PASSWORD ${owner.escapeLiteral(verifier)}`);
      return;
    } catch (err) {
      if (attempt >= 3 || !/concurrently/.test((err as Error).message)) throw err;
    } finally {
      await owner.end().catch(() => undefined);
    }
  }
}

async function canLogIn(url: string): Promise<boolean> {
  const client = new Client(connectionOptions(url));
  client.on('error', () => undefined);
  try {
    await client.connect();
    return true;
  } catch (err) {
    // Only "wrong password / no such login" means we should set it; anything
    // else (server down) surfaces when we try to.
    const code = (err as { code?: string }).code;
    if (code === '28P01' || code === '28000') return false;
    throw err;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** RFC 5803 / PostgreSQL's stored form of a SCRAM-SHA-256 password. */
export function scramVerifier(password: string, iterations = 4096): string {
  const salt = randomBytes(16);
  const salted = pbkdf2Sync(password, salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}
