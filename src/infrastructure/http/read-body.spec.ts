import { Readable } from 'node:stream';
import type { Request } from 'express';
import { DomainError } from '../../domain/shared/domain-error';
import { readBody, utf8Text } from './read-body';

/** A request whose body arrives in `chunks`, declaring `length` (or nothing). */
function request(chunks: string[], length?: number): Request {
  const req = Readable.from(chunks.map((c) => Buffer.from(c))) as unknown as Request;
  (req as unknown as { header: (n: string) => string | undefined }).header = (name) =>
    name.toLowerCase() === 'content-length' && length !== undefined ? String(length) : undefined;
  return req;
}

describe('readBody', () => {
  const parts = ['{"a":', '"ü', 'x"', ',"b":[1,2,3]}'];
  const whole = parts.join('');
  const size = Buffer.byteLength(whole);

  it('returns the exact bytes whether or not a length is declared, and sees every chunk', async () => {
    for (const length of [size, undefined]) {
      const seen: string[] = [];
      const body = await readBody(request(parts, length), 1000, 'state', (c) =>
        seen.push(c.toString()),
      );
      expect(body.toString()).toBe(whole);
      expect(body.length).toBe(size);
      expect(seen).toEqual(parts);
    }
  });

  it('returns only what arrived when less than declared came, and all of it when more came', async () => {
    expect((await readBody(request(parts, size + 50), 1000)).toString()).toBe(whole);
    expect((await readBody(request(parts, 3), 1000)).toString()).toBe(whole);
  });

  it('refuses a body over the limit, declared or not', async () => {
    await expect(readBody(request(parts, size), size - 1)).rejects.toThrow(DomainError);
    await expect(readBody(request(parts), size - 1)).rejects.toThrow(
      `request body exceeds the limit of ${size - 1} bytes`,
    );
    expect((await readBody(request(parts), size)).toString()).toBe(whole);
  });

  it('takes no buffer of a declared length before a share of it came, and one once it did', async () => {
    const sizes: number[] = [];
    const allocate = (n: number) => (sizes.push(n), Buffer.allocUnsafe(n));
    // A client declares 512 MiB, sends a few bytes and goes away.
    const cut = new Readable({ read() {} });
    cut.push(Buffer.from(parts[0]));
    setImmediate(() => cut.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' })));
    (cut as unknown as { header: () => string }).header = () => String(512 * 2 ** 20);
    await expect(
      readBody(cut as unknown as Request, 2 ** 30, 'state', undefined, allocate),
    ).rejects.toThrow('the connection closed before the state was complete');
    expect(sizes).toEqual([]);
    // An honest body, in many chunks: one buffer of its declared size, holding it exactly.
    const many = Array.from({ length: 40 }, (_, i) => `{"chunk":${i}}`);
    const body = await readBody(
      request(many, Buffer.byteLength(many.join(''))),
      1000,
      'state',
      undefined,
      allocate,
    );
    expect(sizes).toEqual([body.length]);
    expect(body.toString()).toBe(many.join(''));
  });

  it('refuses a body cut short by its client as a client error, not a lost database', async () => {
    const cut = new Readable({ read() {} });
    cut.push(Buffer.from(parts[0]));
    // What Node's IncomingMessage fails with when the connection closes mid-body.
    setImmediate(() => cut.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' })));
    (cut as unknown as { header: () => string }).header = () => String(size);
    const refused = readBody(cut as unknown as Request, 1000, 'state');
    await expect(refused).rejects.toMatchObject({
      code: 'REQUEST.INVALID',
      message: `the connection closed before the state was complete (${parts[0].length} bytes came)`,
    });
  });
});

describe('utf8Text', () => {
  it('decodes ASCII and multi-byte UTF-8 exactly, and refuses bytes that are not UTF-8', () => {
    const ascii = Array.from({ length: 128 }, (_, i) => String.fromCharCode(i)).join('');
    for (const text of [ascii, '{"a":"é"}', `${ascii}\u{1F600}€`]) {
      expect(utf8Text(Buffer.from(text, 'utf8'), 'STATE.INVALID', 'state')).toBe(text);
    }
    expect(() => utf8Text(Buffer.from([0x7b, 0xff, 0x7d]), 'STATE.INVALID', 'state')).toThrow(
      'state is not valid UTF-8 (bad byte at offset 1)',
    );
  });
});
