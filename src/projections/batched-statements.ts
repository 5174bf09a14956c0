import pg, { escapeLiteral, type PoolClient, type QueryResult } from 'pg';
import type { Queryable } from '../infrastructure/postgres/database';

/** node-postgres's own conversion of a parameter to its text (or bytes): what the extended protocol sends. */
const prepareValue = (pg as unknown as { utils: { prepareValue(v: unknown): unknown } }).utils
  .prepareValue;

/**
 * Characters of parameters above which a statement goes alone, with its
 * parameters: PostgreSQL's lexer reads a literal character by character,
 * where a parameter's bytes are taken as they are. With a commit's new
 * chunks of raw state written in (760 KB of hexadecimal literals for three
 * changed instances of 1,000), a string of four statements took 7.9 ms
 * (first quartile) where the raw state's statement alone, its chunks as
 * parameters, took 2.2 ms.
 */
const INLINE_LIMIT = 16 * 1024;

interface Waiting {
  args: unknown[];
  resolve: (r: QueryResult) => void;
  reject: (err: unknown) => void;
}

/** A connection several projectors share (batchedStatements). */
export interface SharedConnection {
  queryable: Queryable;
  /** One of the sharers' applies, sending its statements through `queryable` until it settles; returned as it came. */
  applying(apply: Promise<void>): Promise<void>;
}

/**
 * The connection of a read-model transaction several projectors share
 * (ProjectionRunner's together), as a Queryable that sends their statements
 * in turn, several at a time: once every one of the `sharers` (projectors)
 * still applying (SharedConnection.applying) has asked for its next statement (or a turn of the event loop has passed
 * since the first one waiting), what they asked for goes out as one string
 * of statements, one round trip instead of one each. Each projector sends
 * its next statement only once its last one is answered, so a statement
 * that depends on another's rows comes after it; PostgreSQL runs the
 * statements of a string one after the other, each with its own snapshot,
 * as if sent one by one. If one fails, the rest of its string is not run
 * and every caller of that string gets the error: the transaction is
 * spoilt either way and is rolled back.
 *
 * Each parameter is written into the text as a literal of node-postgres's
 * own text for it (a string of several statements takes no parameters); a
 * literal takes its type from where it stands, as a parameter does. A
 * statement that waits alone is sent as it came (named, with its
 * parameters), and so is one that cannot go into a string: a text with a
 * `;`, a config beyond text, values and name (a row mode, type parsers), or
 * parameters of more than INLINE_LIMIT characters or of bytes. A `COPY` (a
 * stream) is refused: together's batches are below every projector's
 * threshold for one, and a refusal only sends the projectors their own
 * batches.
 *
 * Why: a commit's read models are six statements of 0.1–0.6 ms each, and
 * each round trip on a busy machine is two wake-ups of a process besides
 * (docs/performance.md, "The next-serial push (wave 17)").
 */
export function batchedStatements(tx: PoolClient, sharers: number): SharedConnection {
  const waiting: Waiting[] = [];
  let applying = sharers;
  let out = false;
  let soon: NodeJS.Immediate | undefined;
  const send = (): void => {
    if (soon !== undefined) clearImmediate(soon);
    soon = undefined;
    if (out || waiting.length === 0) return;
    out = true;
    const texts = waiting.map((w) => inlined(w.args));
    // What goes alone goes first, one at a time; the rest wait for it.
    const lone = texts.findIndex((t) => t === null);
    const now =
      lone >= 0 || waiting.length === 1 ? waiting.splice(Math.max(lone, 0), 1) : waiting.splice(0);
    const sent =
      now.length === 1
        ? (tx.query as (...a: unknown[]) => Promise<QueryResult>)(...now[0].args).then((r) => [r])
        : tx.query(texts.join(';\n')).then((r) => r as unknown as QueryResult[]);
    void sent
      .then((results) => {
        if (results.length !== now.length) {
          throw new Error(`${now.length} statements answered with ${results.length} results`);
        }
        now.forEach((w, i) => w.resolve(results[i]));
      })
      .catch((err: unknown) => {
        for (const w of now) w.reject(err);
      })
      .then(() => {
        out = false;
        // The callers' next statements are asked for as their answers
        // resolve (microtasks, all run before this): those of the others
        // may wait for the ones still applying.
        ready();
      });
  };
  const ready = (): void => {
    if (out || waiting.length === 0) return;
    if (waiting.length >= applying) send();
    else soon ??= setImmediate(send);
  };
  const query = (...args: unknown[]): Promise<QueryResult> => {
    if (typeof (args[0] as { submit?: unknown } | null)?.submit === 'function') {
      throw new Error('no COPY in a transaction several projectors share');
    }
    return new Promise((resolve, reject) => {
      waiting.push({ args, resolve, reject });
      ready();
    });
  };
  const settled = (apply: Promise<void>): Promise<void> => {
    const done = () => {
      applying--;
      ready();
    };
    apply.then(done, done);
    return apply;
  };
  return { queryable: { query } as unknown as Queryable, applying: settled };
}

/** The statement of a query's arguments with its parameters written in as literals, or null when it must go alone. */
function inlined(args: unknown[]): string | null {
  const [first, second] = args;
  let text: string;
  let values: unknown[];
  if (typeof first === 'string') {
    if (args.length > 2 || (second !== undefined && !Array.isArray(second))) return null;
    text = first;
    values = (second as unknown[] | undefined) ?? [];
  } else {
    const config = first as { text?: unknown; values?: unknown };
    if (
      args.length > 1 ||
      typeof config.text !== 'string' ||
      Object.keys(config).some((k) => k !== 'text' && k !== 'values' && k !== 'name')
    ) {
      return null;
    }
    text = config.text;
    values = Array.isArray(config.values) ? (config.values as unknown[]) : [];
  }
  if (text.includes(';')) return null;
  const prepared = values.map((v) => prepareValue(v));
  let size = 0;
  for (const v of prepared) {
    if (v === null) continue;
    if (typeof v !== 'string') return null; // bytes
    size += v.length;
    if (size > INLINE_LIMIT) return null;
  }
  let unknown = false;
  const written = text.replace(/\$(\d+)/g, (_, n: string) => {
    const i = Number(n) - 1;
    if (i >= prepared.length) unknown = true;
    const v = prepared[i];
    return v === null || v === undefined ? 'NULL' : escapeLiteral(v as string);
  });
  // A parameter without a value: alone, PostgreSQL says so.
  return unknown ? null : written;
}
