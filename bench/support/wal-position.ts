import { Client } from 'pg';

/**
 * Where the server's WAL insertion is, in bytes since its start of time: two
 * readings around a write give the WAL it wrote (the server's, every
 * database's: nothing else should write between them).
 */
export async function walInsertPosition(serverUrl: string): Promise<bigint> {
  const client = new Client({ connectionString: serverUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ at: string }>(
      "SELECT pg_current_wal_insert_lsn() - '0/0' AS at",
    );
    return BigInt(rows[0].at);
  } finally {
    await client.end();
  }
}
