import express from 'express';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { parseJsonExact, stringifyJson } from '../../domain/terraform/lossless-json';
import { createLogger } from '../logging/logger';
import { JSON_PIECE_CHARS, jsonPieces, sendJson } from './json-pieces';
import { fuzzSeeds, seedRange, seededRandom, withSeed } from '../../../test/support/seeded-random';

/** A value of JSON's shapes, with what JSON.stringify leaves out or writes as null. */
function randomValue(next: () => number, depth: number): unknown {
  const pick = Math.floor(next() * (depth > 3 ? 5 : 8));
  switch (pick) {
    case 0:
      return 'x'.repeat(Math.floor(next() * 40)) + '"\\\u0001é';
    case 1:
      return Math.floor(next() * 1e6) - 5e5;
    case 2:
      return next() < 0.5 ? null : next() < 0.5;
    case 3:
      return next() < 0.5 ? undefined : new Date(Math.floor(next() * 1e12));
    case 4:
      return () => 1;
    case 5:
    case 6:
      return Array.from({ length: Math.floor(next() * 30) }, () => randomValue(next, depth + 1));
    default:
      return Object.fromEntries(
        Array.from({ length: Math.floor(next() * 8) }, (_, i) => [
          `k${i}"\n`,
          randomValue(next, depth + 1),
        ]),
      );
  }
}

describe('jsonPieces', () => {
  it('joins to the exact text of stringifyJson and of JSON.stringify, pieces of any size', () => {
    for (const seed of fuzzSeeds(seedRange(1, 300))) {
      withSeed(seed, () => {
        const { next } = seededRandom(seed);
        const value = { top: randomValue(next, 0), rows: randomValue(next, 1) };
        for (const pieceChars of [1, 7, 64, 1 << 20]) {
          expect([...jsonPieces(value, { pieceChars })].join('')).toBe(stringifyJson(value));
          expect([...jsonPieces(value, { pieceChars, lossless: false })].join('')).toBe(
            JSON.stringify(value),
          );
        }
      });
    }
  });

  it('writes numbers a double cannot hold as they came', () => {
    const value = parseJsonExact(
      '{"rows":[[12345678901234567890,1.5],[-1e400]],"n":98765432109876543210}',
    );
    expect([...jsonPieces(value, { pieceChars: 3 })].join('')).toBe(
      '{"rows":[[12345678901234567890,1.5],[-1e400]],"n":98765432109876543210}',
    );
  });

  it('makes a piece of about its size at a time, each only when asked for', () => {
    const rows = Array.from({ length: 10_000 }, (_, i) => [i, 'x'.repeat(90)]);
    let encoded = 0;
    const counted = rows.map((row) => ({ toJSON: () => (encoded++, row) }));
    const pieces = jsonPieces({ columns: ['n', 'pad'], rows: counted }, { pieceChars: 10_000 });
    const first = pieces.next();
    expect(first.done).toBe(false);
    expect(encoded).toBeLessThan(200);
    const rest = [...pieces];
    expect(encoded).toBe(10_000);
    for (const piece of [first.value as string, ...rest.slice(0, -1)]) {
      expect(piece.length).toBeGreaterThanOrEqual(10_000);
      expect(piece.length).toBeLessThan(10_200);
    }
    expect(JSON.parse([first.value, ...rest].join(''))).toEqual({ columns: ['n', 'pad'], rows });
  });
});

describe('sendJson', () => {
  let server: Server;
  let base: string;
  const logged: Record<string, unknown>[] = [];

  beforeAll(async () => {
    const logger = createLogger(
      'info',
      'json',
      new Writable({
        write(chunk: Buffer, _enc, done) {
          logged.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
          done();
        },
      }),
    );
    const rows = Array.from({ length: 20 }, (_, i) => [i, 'x'.repeat(JSON_PIECE_CHARS / 4)]);
    const app = express();
    app.use((req: express.Request & { id?: string }, _res, next) => {
      req.id = 'req-7';
      next();
    });
    // Its 13th row cannot be encoded: the first pieces are out by then.
    app.get('/rows', (_req, res) => {
      const failing = {
        toJSON: () => {
          throw new TypeError('row 12 cannot be encoded');
        },
      };
      sendJson(res, { rows: [...rows.slice(0, 12), failing, ...rows.slice(12)] }, true, logger);
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('cuts off an answer whose encoding fails after its first piece, and logs why', async () => {
    const res = await fetch(`${base}/rows`);
    expect(res.status).toBe(200);
    // The reader never takes a part for the whole answer.
    await expect(res.text()).rejects.toThrow();
    for (let i = 0; i < 100 && logged.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({
      level: 50,
      requestId: 'req-7',
      msg: 'answer cut off after it began',
      err: { message: 'row 12 cannot be encoded' },
    });
  });
});
