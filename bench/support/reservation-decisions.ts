import * as path from 'node:path';
import type { AcquireReservations } from '../../src/domain/state/state.commands';
import type { StateEvent } from '../../src/domain/state/state.events';
import type { ActiveState, StateAggregate } from '../../src/domain/state/state.model';
import { printTable } from './report';
import { distribution, formatInt, formatMs } from './stats';

/**
 * The decisions of a run of N globs, one synchronous piece of kld's thread
 * each (wave 22): its start, a second run asking the same globs (refused,
 * every holder named), the first run's heartbeat, and a 2-glob run's start
 * right after it. In process, this build's domain and (KL_BENCH_DOMAIN_BEFORE
 * =<another worktree>, its dist/src) another's, taking turns round by round.
 * A build with readGlobsAhead and indexInPieces reads a start's globs and
 * indexes the state's reservations a thousand per turn first, as its kld
 * does: the decision is timed apart from those pieces.
 */

interface Domain {
  decide(command: unknown, state: StateAggregate): StateEvent[];
  evolve(state: StateAggregate, event: StateEvent): StateAggregate;
  initialState(): StateAggregate;
  readGlobsAhead?(requests: readonly { glob: string }[], from: number, to: number): boolean;
  indexInPieces?(state: ActiveState, per: number): Iterable<void>;
}

async function domainAt(root: string): Promise<Domain> {
  const at = (file: string) => path.join(root, 'dist/src/domain/state', file);
  const decider = (await import(at('state.decider'))) as Pick<Domain, 'decide'>;
  const evolve = (await import(at('state.evolve'))) as Pick<Domain, 'evolve'>;
  const model = (await import(at('state.model'))) as Pick<Domain, 'initialState'>;
  const reserve = (await import(at('reserve'))) as Pick<Domain, 'readGlobsAhead'>;
  const holders = (await import(at('holders'))) as Pick<Domain, 'indexInPieces'>;
  return { ...decider, ...evolve, ...model, ...reserve, ...holders };
}

const NOW = '2026-12-02T12:00:00.000Z';
const ROUNDS = 7;
const PIECE = 1000;

type Step =
  | 'start: globs read ahead (longest piece)'
  | '409: globs read, holders indexed ahead (longest piece)'
  | 'start: decision'
  | 'start: evolve'
  | '409: decision'
  | 'heartbeat: decision + evolve'
  | '2-glob start after it: decision';

function time<T>(f: () => T): [number, T] {
  const t0 = performance.now();
  const out = f();
  return [performance.now() - t0, out];
}

function round(domain: Domain, n: number, tag: string): Map<Step, number> {
  const metadata = { actor: 'bench', correlationId: 'c', now: NOW };
  // Texts as a request body gives them: strings of their own, not one template's.
  const globs = (run: string, count: number) =>
    JSON.parse(
      JSON.stringify(
        Array.from({ length: count }, (_, i) => `module.m${i % 50}.aws_instance.${run}${i}[0]`),
      ),
    ) as string[];
  const acquire = (runId: string, texts: string[]): AcquireReservations => ({
    type: 'AcquireReservations',
    data: {
      name: 'bench',
      runId,
      reservationIds: texts.map((_, i) => `${runId}-${i}`),
      requests: texts.map((glob) => ({ glob, mode: 'write' as const })),
      leaseSeconds: 3600,
      info: {},
      baseVersion: 1,
      writeSet: texts,
      readSet: [],
    },
    metadata,
  });
  const readAhead = (command: AcquireReservations): number => {
    let longest = 0;
    const { requests } = command.data;
    for (let at = 0; at < requests.length && domain.readGlobsAhead; at += PIECE) {
      const to = Math.min(requests.length, at + PIECE);
      longest = Math.max(longest, time(() => domain.readGlobsAhead!(requests, at, to))[0]);
    }
    return longest;
  };
  const out = new Map<Step, number>();
  const created = domain.evolve(domain.initialState(), {
    type: 'StateCreated',
    data: { stateId: 's', name: 'bench' },
  }) as ActiveState;
  const empty: ActiveState = { ...created, version: 1, serial: 1, lineage: 'l' };

  const start = acquire(`a-${tag}`, globs(`a${tag}`, n));
  out.set('start: globs read ahead (longest piece)', readAhead(start));
  const [startMs, events] = time(() => domain.decide(start, empty));
  out.set('start: decision', startMs);
  const [evolveMs, held] = time(() =>
    events.reduce<StateAggregate>((s, e) => domain.evolve(s, e), empty),
  );
  out.set('start: evolve', evolveMs);

  const again = acquire(`b-${tag}`, globs(`a${tag}`, n));
  let longest = readAhead(again);
  const pieces = domain.indexInPieces?.(held as ActiveState, PIECE)[Symbol.iterator]();
  for (let done = pieces === undefined; !done;) {
    const [ms, step] = time(() => pieces!.next());
    done = step.done === true;
    longest = Math.max(longest, ms);
  }
  out.set('409: globs read, holders indexed ahead (longest piece)', longest);
  const [refusedMs] = time(() => {
    try {
      domain.decide(again, held);
    } catch (err) {
      if ((err as { code?: string }).code === 'RESERVATION.CONFLICT') return;
      throw err;
    }
    throw new Error('not refused');
  });
  out.set('409: decision', refusedMs);

  const [beatMs, renewed] = time(() =>
    domain
      .decide(
        {
          type: 'RenewReservations',
          data: { name: 'bench', runId: `a-${tag}`, leaseSeconds: 3600 },
          metadata,
        },
        held,
      )
      .reduce<StateAggregate>((s, e) => domain.evolve(s, e), held),
  );
  out.set('heartbeat: decision + evolve', beatMs);
  const small = acquire(`c-${tag}`, globs(`c${tag}`, 2));
  out.set('2-glob start after it: decision', time(() => domain.decide(small, renewed))[0]);
  return out;
}

export async function reservationDecisions(
  sizes: number[],
  thisBuild: Domain,
  beforeRoot: string | undefined,
): Promise<void> {
  const builds: [string, Domain][] = [['this build', thisBuild]];
  if (beforeRoot) builds.push(['before', await domainAt(beforeRoot)]);
  for (const n of sizes) {
    const figures = new Map<string, number[]>();
    for (let r = 1; r <= ROUNDS; r++) {
      for (const [label, domain] of r % 2 === 1 ? builds : [...builds].reverse()) {
        for (const [step, ms] of round(domain, n, `${r}${label.length}`)) {
          const key = `${step}\t${label}`;
          figures.set(key, [...(figures.get(key) ?? []), ms]);
        }
      }
    }
    console.log(
      `\nDecisions of a run of ${formatInt(n)} globs, one turn of kld's thread each; ` +
        `median (min–max) of ${ROUNDS} rounds, ms`,
    );
    printTable(
      ['step', 'build', 'ms'],
      [...figures].map(([key, v]) => {
        const d = distribution(v);
        return [...key.split('\t'), `${formatMs(d.p50)} (${formatMs(d.min)}–${formatMs(d.max)})`];
      }),
    );
  }
}
