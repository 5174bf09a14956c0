import { Writable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { writeInTurns } from './write-in-turns';

/** A socket whose reader takes `taken` chunks, then stops reading. */
function reader(taken: number) {
  const received: string[] = [];
  const stalled: (() => void)[] = [];
  const out = new Writable({
    highWaterMark: 16 * 1024,
    decodeStrings: false,
    write(chunk: string, _encoding, done) {
      received.push(chunk);
      if (received.length <= taken) done();
      else stalled.push(done);
    },
  });
  const resume = () => {
    taken = Infinity;
    for (const done of stalled.splice(0)) done();
  };
  return { out, received, resume };
}

const pieces = Array.from({ length: 50 }, (_, i) => String(i % 10).repeat(1 << 20));

describe('writeInTurns', () => {
  it('writes every piece, then the end', async () => {
    const { out, received } = reader(Infinity);
    await writeInTurns(out, ['{"a":', '1'], '}');
    expect(received.join('')).toBe('{"a":1}');
    expect(out.writableEnded).toBe(true);
  });

  it('holds a reader that stopped to the piece it is on, not the whole answer', async () => {
    const { out, received, resume } = reader(3);
    const written = writeInTurns(out, pieces);
    for (let i = 0; i < 200; i++) await nextTurn();
    // Written regardless, all 50 MiB sat in the buffer of a reader that took 3 MiB.
    expect(out.writableLength).toBeLessThanOrEqual(1 << 20);
    expect(received).toHaveLength(4);
    resume();
    await written;
    expect(received.join('')).toBe(pieces.join(''));
  });

  it('gives the event loop a turn between pieces that drain at once', async () => {
    // An HTTP answer's socket the kernel takes each piece from: corked until the next
    // tick, so write answers false, and 'drain' comes on that tick, in the same turn.
    const written: number[] = [];
    let turns = 0;
    const out = new Writable({
      highWaterMark: 16 * 1024,
      decodeStrings: false,
      write(_chunk: string, _encoding, done) {
        written.push(turns);
        process.nextTick(done);
      },
    });
    const counting = setInterval(() => turns++, 0);
    const ticking = (async () => {
      for (let i = 0; i < 30; i++) {
        await nextTurn();
        turns++;
      }
    })();
    try {
      await writeInTurns(out, pieces.slice(0, 10));
    } finally {
      clearInterval(counting);
      await ticking;
    }
    // Each piece in a turn of its own: others' callbacks (a timer, an immediate) ran in between.
    expect(new Set(written).size).toBe(written.length);
  });

  it('cuts off a reader that takes nothing for the silent bound', async () => {
    const { out } = reader(0);
    await writeInTurns(out, pieces, '', 50);
    expect(out.destroyed).toBe(true);
    expect(out.writableEnded).toBe(false);
  });

  it('waits for a reader that is slow, not silent', async () => {
    const received: string[] = [];
    const out = new Writable({
      highWaterMark: 16 * 1024,
      decodeStrings: false,
      write(chunk: string, _encoding, done) {
        received.push(chunk);
        setTimeout(done, 30);
      },
    });
    await writeInTurns(out, pieces.slice(0, 4), '', 50);
    expect(out.destroyed).toBe(false);
    expect(received.join('')).toBe(pieces.slice(0, 4).join(''));
  });

  it('stops writing to a reader that went away', async () => {
    const { out, received } = reader(1);
    const written = writeInTurns(out, pieces);
    await nextTurn();
    out.destroy();
    await written;
    expect(received.length).toBeLessThanOrEqual(2);
  });

  it('asks for a piece made on demand only once the one before has left', async () => {
    const { out, received, resume } = reader(2);
    let made = 0;
    async function* onDemand() {
      for (const piece of pieces) {
        made += 1;
        yield piece;
      }
    }
    const written = writeInTurns(out, onDemand());
    for (let i = 0; i < 200; i++) await nextTurn();
    // A slice's pages are read as its reader takes them, not all before.
    expect(made).toBeLessThanOrEqual(received.length + 1);
    resume();
    await written;
    expect(received.join('')).toBe(pieces.join(''));
  });

  it('cuts the answer off when its pieces fail after some were written', async () => {
    const { out, received } = reader(Infinity);
    async function* failing() {
      yield '{"a":';
      throw new Error('the page could not be read');
    }
    await expect(writeInTurns(out, failing(), '}')).rejects.toThrow('could not be read');
    expect(received.join('')).toBe('{"a":');
    expect(out.destroyed).toBe(true);
    expect(out.writableEnded).toBe(false);
  });

  it('leaves an HTTP answer with nothing out yet for its error to be sent', async () => {
    const { out } = reader(Infinity);
    Object.assign(out, { headersSent: false });
    async function* failing(): AsyncGenerator<string> {
      yield* [];
      throw new Error('the first page could not be read');
    }
    await expect(writeInTurns(out, failing())).rejects.toThrow('could not be read');
    expect(out.destroyed).toBe(false);
  });
});
