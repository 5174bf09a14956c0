import * as fs from 'node:fs';
import * as path from 'node:path';
import type { TraceLine } from './pool-trace-preload';
import { formatMs } from './stats';

/** The node argument that loads pool-trace-preload into kld, and where it writes. */
export function poolTraceArgs(out: string): { nodeArgs: string; env: Record<string, string> } {
  return {
    nodeArgs: `-r ${path.join(__dirname, 'pool-trace-preload.js')}`,
    env: { KL_PROBE_POOL_OUT: out },
  };
}

/** What kld recorded since the last call (SIGUSR2; the file appears once kld's loop is free). */
export async function takePoolTrace(pid: number, out: string): Promise<TraceLine[]> {
  const file = `${out}.${pid}`;
  fs.rmSync(file, { force: true });
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 600 && !fs.existsSync(file); i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 100));
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  fs.rmSync(file, { force: true });
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as TraceLine);
}

type Statement = Extract<TraceLine, { k: 'q' }>;

/** One projector transaction of the commands' pool: its statements in order. */
interface ProjectorTx {
  projector: string;
  statements: Statement[];
}

const LOCKED = /^BEGIN; SELECT pg_(?:try_)?advisory_xact_lock\(\d+,\s*hashtext\('([^']+)'/;

function projectorTransactions(lines: TraceLine[]): ProjectorTx[] {
  const open = new Map<number, ProjectorTx>();
  const done: ProjectorTx[] = [];
  for (const l of lines) {
    if (l.k !== 'q' || l.p !== 'commands') continue;
    const m = LOCKED.exec(l.t);
    if (m) {
      open.set(l.c, { projector: m[1], statements: [l] });
      continue;
    }
    const tx = open.get(l.c);
    if (!tx) continue;
    tx.statements.push(l);
    if (/^(COMMIT|ROLLBACK)/.test(l.t)) {
      done.push(tx);
      open.delete(l.c);
    }
  }
  return done.concat([...open.values()]);
}

/**
 * Over [from, to] (epoch ms): the waits for each pool's connections, the
 * statements of each pool, the projector transactions that overlapped it
 * (lock taken, the gap to their next statement, where the batch reads its
 * events, rows written, commit), and kld's loop delays.
 */
export function summarizePoolTrace(lines: TraceLine[], from: number, to: number): string {
  const out: string[] = [];
  const inWindow = (s: number, a: number | null) => s <= to && (a ?? to) >= from;
  const pools = new Map<string, { waits: number[]; queued: number; stmts: number[] }>();
  const pool = (p: string) => {
    let v = pools.get(p);
    if (!v) pools.set(p, (v = { waits: [], queued: 0, stmts: [] }));
    return v;
  };
  for (const l of lines) {
    if (l.k === 'w' && inWindow(l.s, l.a)) {
      const v = pool(l.p);
      v.waits.push((l.a ?? to) - l.s);
      v.queued = Math.max(v.queued, l.n);
    } else if (l.k === 'q' && inWindow(l.s, l.a)) {
      pool(l.p).stmts.push((l.a ?? to) - l.s);
    }
  }
  const max = (xs: number[]) => xs.reduce((m, x) => Math.max(m, x), 0);
  const sum = (xs: number[]) => xs.reduce((m, x) => m + x, 0);
  for (const [p, v] of pools) {
    out.push(
      `pool ${p}: ${v.waits.length} connection waits (max ${formatMs(max(v.waits))} ms, ` +
        `at most ${v.queued} queued before one), ${v.stmts.length} statements ` +
        `(max ${formatMs(max(v.stmts))} ms, sum ${formatMs(sum(v.stmts))} ms)`,
    );
  }
  const loop = lines.filter(
    (l): l is Extract<TraceLine, { k: 'l' }> => l.k === 'l' && l.s <= to && l.s + l.d >= from,
  );
  out.push(
    `kld loop: ${loop.length} delays over 20 ms, max ${formatMs(max(loop.map((l) => l.d)))} ms, ` +
      `sum ${formatMs(sum(loop.map((l) => l.d)))} ms over a ${formatMs(to - from)} ms window`,
  );
  const gcs = lines.filter(
    (l): l is Extract<TraceLine, { k: 'g' }> => l.k === 'g' && l.s <= to && l.s + l.d >= from,
  );
  const major = gcs.filter((g) => g.major);
  out.push(
    `kld GC: ${gcs.length} pauses, sum ${formatMs(sum(gcs.map((g) => g.d)))} ms; ` +
      `${major.length} full, max ${formatMs(max(major.map((g) => g.d)))} ms`,
  );
  const loopIn = (s: number, e: number) =>
    sum(loop.map((l) => Math.max(0, Math.min(e, l.s + l.d) - Math.max(s, l.s))));
  const txs = projectorTransactions(lines)
    .filter((tx) => {
      const first = tx.statements[0];
      const last = tx.statements[tx.statements.length - 1];
      return inWindow(first.s, last.a);
    })
    .map((tx) => {
      const [lock, ...rest] = tx.statements;
      const last = tx.statements[tx.statements.length - 1];
      const lockedAt = lock.a ?? to;
      const next = rest[0];
      const gap = next ? next.s - lockedAt : (last.a ?? to) - lockedAt;
      const commit = /^(COMMIT|ROLLBACK)/.test(last.t) ? last : null;
      const rowsEnd = commit ? commit.s : (last.a ?? to);
      return {
        tx,
        total: (last.a ?? to) - lock.s,
        lock: lockedAt - lock.s,
        gap,
        gapLoop: loopIn(lockedAt, lockedAt + gap),
        rows: next ? rowsEnd - next.s : 0,
        commit: commit ? (commit.a ?? to) - commit.s : 0,
        at: lock.s - from,
        n: tx.statements.length,
      };
    })
    .sort((a, b) => b.total - a.total);
  out.push(
    `projector transactions: ${txs.length}; the longest (lock taken / gap to the next ` +
      'statement (loop delay in it) / rows / commit, ms):',
  );
  for (const t of txs.slice(0, 8)) {
    out.push(
      `  +${formatMs(t.at)} ${t.tx.projector}: ${formatMs(t.total)} = ${formatMs(t.lock)} / ` +
        `${formatMs(t.gap)} (${formatMs(t.gapLoop)}) / ${formatMs(t.rows)} / ` +
        `${formatMs(t.commit)}, ${t.n} statements`,
    );
    // What the events' pool did during that gap.
    const lockedAt = t.tx.statements[0].a ?? to;
    const during = lines.filter(
      (l): l is Extract<TraceLine, { k: 'q' | 'w' }> =>
        (l.k === 'q' || l.k === 'w') &&
        l.p === 'events' &&
        l.s <= lockedAt + t.gap &&
        (l.a ?? to) >= lockedAt &&
        (l.a ?? to) - l.s > 10,
    );
    for (const l of during.slice(0, 4)) {
      out.push(
        `      events ${l.k === 'w' ? `connection wait (${l.n} queued)` : l.t.slice(0, 60)}: ` +
          `${formatMs((l.a ?? to) - l.s)} ms from +${formatMs(l.s - from)}`,
      );
    }
  }
  return out.join('\n');
}
