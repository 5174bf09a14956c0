import {
  InstanceObjectV4,
  instanceObjectText,
  parseStateDocument,
  stateDocumentText,
} from '../../domain/terraform';
import { DocumentTextMemo } from './document-text-memo';

/** A state document of `count` instances, the k-th holding `value(k)`, padded to a big body. */
function body(serial: number, count: number, value: (k: number) => string): Buffer {
  const instances = Array.from(
    { length: count },
    (_, k) =>
      `{"index_key":${k},"schema_version":0,"attributes":{"id":"${value(k)}","pad":"${'p'.repeat(200)}"}}`,
  );
  return Buffer.from(
    `{"version":4,"terraform_version":"1.11.4","serial":${serial},"lineage":"l","outputs":{},` +
      `"resources":[{"mode":"managed","type":"terraform_data","name":"x",` +
      `"provider":"provider[\\"terraform.io/builtin/terraform\\"]","instances":[${instances.join(',')}]}]}`,
  );
}

const decode = (b: Buffer) => b.toString('utf8');

/** What kld does with a received body: read it into the memo's buffer, then parse it. */
function receive(memo: DocumentTextMemo, bytes: Buffer) {
  const into = memo.bodyBuffer('s', bytes.length);
  bytes.copy(into);
  return { into, document: memo.parse('s', into, decode) };
}

describe('DocumentTextMemo', () => {
  const count = 6000; // about 1.4 MB: big enough to be recycled

  it('reads a big body into the buffer of the body before the last, and parses it exactly', () => {
    const memo = new DocumentTextMemo();
    const versions = [
      body(1, count, (k) => `a${k}`),
      body(2, count, (k) => (k === 17 ? 'changed' : `a${k}`)),
      // shorter than the first: the recycled buffer's tail must not show
      body(3, count - 1, (k) => (k === 4000 ? 'again' : `a${k}`)),
      body(4, count - 1, (k) => (k === 4000 ? 'again' : `a${k}`)),
    ];
    const received = versions.map((bytes) => receive(memo, bytes));
    received.forEach(({ document }, v) => {
      expect(document).toEqual(parseStateDocument(versions[v].toString('utf8')));
    });
    expect(received[2].into.buffer).toBe(received[0].into.buffer);
    expect(received[3].into.buffer).toBe(received[1].into.buffer);
    expect(received[1].into.buffer).not.toBe(received[0].into.buffer);
    expect(received[2].into.length).toBe(versions[2].length);
  });

  it('keeps no spare buffer when there is no room for one, and still parses every body exactly', async () => {
    const asked: number[] = [];
    const memo = new DocumentTextMemo({
      roomFor: (bytes) => {
        asked.push(bytes);
        return false;
      },
    });
    const versions = [
      body(1, count, (k) => `a${k}`),
      body(2, count, (k) => (k === 17 ? 'changed' : `a${k}`)),
      body(3, count, (k) => (k === 17 ? 'changed' : `a${k}`)),
      body(4, count + 1, (k) => (k === 4000 ? 'again' : `a${k}`)),
    ];
    const received: ReturnType<typeof receive>[] = [];
    for (const bytes of versions) {
      received.push(receive(memo, bytes));
      // Room is asked once the parse has returned, as a commit waits for PostgreSQL.
      await new Promise((r) => setImmediate(r));
    }
    received.forEach(({ document }, v) => {
      expect(document).toEqual(parseStateDocument(versions[v].toString('utf8')));
    });
    const buffers = new Set(received.map(({ into }) => into.buffer));
    expect(buffers.size).toBe(versions.length);
    // asked once per replaced big body, for the whole buffer it would keep
    expect(asked).toHaveLength(versions.length - 1);
    expect(asked[0]).toBeGreaterThanOrEqual(versions[0].length);
  });

  it('gives two bodies read at the same time two buffers', () => {
    const memo = new DocumentTextMemo();
    receive(
      memo,
      body(1, count, (k) => `a${k}`),
    );
    receive(
      memo,
      body(2, count, (k) => `b${k}`),
    );
    const one = memo.bodyBuffer('s', 1_500_000);
    const other = memo.bodyBuffer('s', 1_500_000);
    expect(one.buffer).not.toBe(other.buffer);
  });

  it('keeps a refused body out: the buffer it was read into is not handed out again', () => {
    const memo = new DocumentTextMemo();
    const first = receive(
      memo,
      body(1, count, (k) => `a${k}`),
    );
    receive(
      memo,
      body(2, count, (k) => `b${k}`),
    );
    const bad = body(3, count, (k) => `c${k}`);
    bad[bad.length - 1] = 0x20; // cut: not JSON
    const into = memo.bodyBuffer('s', bad.length);
    expect(into.buffer).toBe(first.into.buffer);
    bad.copy(into);
    expect(() => memo.parse('s', into, decode)).toThrow();
    // the entry still holds the second body; nothing spare until the next accepted one
    const next = memo.bodyBuffer('s', bad.length);
    expect(next.buffer).not.toBe(first.into.buffer);
    const fourth = body(4, count, (k) => `b${k}`);
    fourth.copy(next);
    expect(memo.parse('s', next, decode)).toEqual(parseStateDocument(fourth.toString('utf8')));
  });

  it('finds where a whole parse has its instances only when the next body comes, from the served bytes', () => {
    const asked: InstanceObjectV4[] = [];
    const memo = new DocumentTextMemo({
      served: (o) => {
        asked.push(o);
        return Buffer.from(instanceObjectText(o));
      },
    });
    // as terraform writes a document (and kld serves it): two-space indentation
    const written = (bytes: Buffer) =>
      Buffer.from(stateDocumentText(parseStateDocument(bytes.toString('utf8'))));
    const versions = [
      written(body(1, count, (k) => `a${k}`)),
      written(body(2, count, (k) => (k === 17 ? 'changed' : `a${k}`))),
      written(body(3, count, (k) => (k === 17 ? 'changed' : `a${k}`))),
    ];
    const first = receive(memo, versions[0]);
    expect(asked).toHaveLength(0); // the first parse looks for no instance
    const second = receive(memo, versions[1]);
    expect(asked).toEqual(first.document.resources[0].instances);
    const third = receive(memo, versions[2]);
    expect(asked).toHaveLength(count); // a reusing parse's spans are its own scan's
    [first, second, third].forEach(({ document }, v) => {
      expect(document).toEqual(parseStateDocument(versions[v].toString('utf8')));
    });
    const before = first.document.resources[0].instances;
    const after = second.document.resources[0].instances;
    expect(after.filter((o, k) => o === before[k])).toHaveLength(count - 1);
    expect(third.document.resources[0].instances.every((o, k) => o === after[k])).toBe(true);
    // the first body is no entry's any more: the third was read into it
    expect(third.into.buffer).toBe(first.into.buffer);
  });

  it('reuses the objects a body was parsed into even if its document is changed afterwards', () => {
    const memo = new DocumentTextMemo({ served: (o) => Buffer.from(instanceObjectText(o)) });
    const written = (bytes: Buffer) =>
      Buffer.from(stateDocumentText(parseStateDocument(bytes.toString('utf8'))));
    const first = written(body(1, count, (k) => `a${k}`));
    const next = written(body(2, count, (k) => (k === 17 ? 'changed' : `a${k}`)));
    const { document } = receive(memo, first);
    // nothing in kld does this; the memo must not care
    const instances = document.resources[0].instances;
    instances[5] = { ...instances[5], attributes: { id: 'not what was sent' } };
    expect(receive(memo, next).document).toEqual(parseStateDocument(next.toString('utf8')));
  });

  it('does not recycle small bodies', () => {
    const memo = new DocumentTextMemo();
    const small = (serial: number) => body(serial, 3, (k) => `a${k}`);
    const a = receive(memo, small(1));
    receive(memo, small(2));
    const c = receive(memo, small(3));
    expect(c.into.buffer === a.into.buffer && c.into.byteOffset === a.into.byteOffset).toBe(false);
    expect(c.document).toEqual(parseStateDocument(small(3).toString('utf8')));
  });
});
