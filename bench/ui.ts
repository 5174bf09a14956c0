import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from '../test/support/browser';
import { openBenchDatabase } from './support/bench-database';
import { bigStateInstanceCount, generateBigState } from './support/big-state-generator';
import { killAll, startKld } from './support/refresh-processes';
import { printMachine, printTable } from './support/report';
import { distribution, formatInt, formatMs, verdict } from './support/stats';

/**
 * The dashboard in Debian's chromium against a real kld: the States page
 * with 1,000 states and the Resources page of the 20,000-instance big state
 * (paginated, 100 rows a page). Prints figures against the 1 s target;
 * never fails on a miss.
 *
 *   npm run bench:ui
 *
 *   KL_BENCH_DATABASE_URL=postgres://…   else an embedded PostgreSQL
 *   KL_BENCH_UI_STATES=1000  KL_BENCH_UI_SIZE=9996 (var.size: 2 × size + 8 instances)
 *   KL_BENCH_UI_REPS=7       KL_CHROMIUM=/usr/bin/chromium
 *   KL_BENCH_UI_PEER=<other build's dist/src/kld.js>: a second kld of that
 *     build on the same database; every step runs on both, alternating, and
 *     its rows say "(peer)" (before/after in the same run, same load)
 *
 * Each figure is wall clock from the bench's command (a navigation in a
 * fresh tab, a click) until the page shows the rows: requests, JSON
 * parsing and rendering included.
 */

const TARGET_MS = 1000;
const STATES = intEnv('KL_BENCH_UI_STATES', 1000);
const SIZE = intEnv('KL_BENCH_UI_SIZE', 9996);
const REPS = intEnv('KL_BENCH_UI_REPS', 7);
const BIG = 'bench/big-state';
const KLD = path.resolve(__dirname, '../src/kld.js');
const PEER = process.env.KL_BENCH_UI_PEER;

function intEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  const n = raw === undefined ? fallback : Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer`);
  return n;
}

function smallState(i: number): string {
  return JSON.stringify({
    version: 4,
    terraform_version: '1.11.4',
    serial: 1,
    lineage: `bench-${i}`,
    outputs: {},
    resources: [
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 'one',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [{ schema_version: 0, attributes: { id: `id-${i}` }, sensitive_attributes: [] }],
      },
    ],
    check_results: null,
  });
}

async function post(url: string, body: string): Promise<void> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body,
  });
  if (!res.ok) throw new Error(`POST ${url}: ${res.status} ${await res.text()}`);
}

/**
 * Runs `step` REPS times in a fresh tab each, after one warm-up, on every
 * build in turn (so each sees the same load); milliseconds per build.
 */
async function measure(
  browser: Browser,
  uis: string[],
  step: (page: Page, ui: string, build: number) => Promise<number>,
): Promise<number[][]> {
  const samples: number[][] = uis.map(() => []);
  for (let i = 0; i <= REPS; i++) {
    for (const [b, ui] of uis.entries()) {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      await page.addInitScript({ content: ROWS_SEEN });
      try {
        const ms = await step(page, ui, b);
        if (i > 0) samples[b].push(ms);
      } finally {
        await page.close();
      }
    }
  }
  return samples;
}

/** Records (page clock) when the first table row shows; added to every tab before its scripts run. */
const ROWS_SEEN = `(() => {
  const seen = new MutationObserver(() => {
    if (document.querySelector('tbody tr')) {
      window.__klRowsAt = performance.now();
      seen.disconnect();
    }
  });
  seen.observe(document, { childList: true, subtree: true });
})();`;

/** Where one page open's time went, in ms of the page's clock from the navigation's start. */
interface Waterfall {
  /** The page (index.html) received. */
  html: number;
  /** app.js received (deferred: it runs once the page is parsed). */
  script: number;
  /** The data request sent, by the page's first render. */
  apiSent: number;
  /** kld's part of it: from the request sent to its first byte back (loopback, so server time). */
  apiServer: number;
  /** The data received. */
  apiDone: number;
  /** Its body, KiB as sent. */
  apiKiB: number;
  /** The first row shown. */
  rows: number;
}

async function waterfall(page: Page, api: string): Promise<Waterfall> {
  return (await page.evaluate(`(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const res = performance.getEntriesByType('resource');
    const js = res.find((r) => r.name.endsWith('/ui/app.js'));
    const data = res.find((r) => r.name.includes(${JSON.stringify(api)}));
    return {
      html: nav.responseEnd,
      script: js ? js.responseEnd : NaN,
      apiSent: data ? data.requestStart : NaN,
      apiServer: data ? data.responseStart - data.requestStart : NaN,
      apiDone: data ? data.responseEnd : NaN,
      apiKiB: data ? data.encodedBodySize / 1024 : NaN,
      rows: window.__klRowsAt ?? NaN,
    };
  })()`)) as Waterfall;
}

function waterfallRows(label: string, all: Waterfall[]): string[][] {
  const parts: [string, (w: Waterfall) => number][] = [
    ['page received', (w) => w.html],
    ['app.js received', (w) => w.script],
    ['data request sent', (w) => w.apiSent],
    ['  of which kld (to first byte)', (w) => w.apiServer],
    ['data received', (w) => w.apiDone],
    ['  its size (KiB, not ms)', (w) => w.apiKiB],
    ['first row shown', (w) => w.rows],
  ];
  return parts.map(([part, pick]) => {
    const d = distribution(all.map(pick).filter(Number.isFinite));
    return [`${label}: ${part}`, String(d.count), formatMs(d.p50), formatMs(d.max)];
  });
}

/** What a step waits for, tested in the page. */
type Shown =
  | { text: string }
  /**
   * The summary line (`N of M states`, `N instances`) matches `re` and does not
   * start with `not`. This and `sorted` also wait until nothing is `aria-busy`
   * (the rows answer the new sort or filter, not the previous one).
   */
  | { summary: string; not: string }
  /** The column sorted ascending is `sorted`. */
  | { sorted: string };

/**
 * Waits until the page shows `what`, checked on every animation frame.
 * Playwright's locator waits re-check after growing pauses (up to 500 ms),
 * which made every figure here a step of that backoff rather than the
 * page's time. (A function, not a string: the page's CSP forbids eval.)
 */
function shows(page: Page, what: Shown): Promise<unknown> {
  return page.waitForFunction(
    (w: Shown) => {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const doc = (globalThis as any).document;
      if ('text' in w) return (doc.body.textContent as string).includes(w.text);
      if (doc.querySelector('[aria-busy="true"]')) return false;
      if ('summary' in w) {
        const s: string = doc.querySelector('.summary')?.textContent ?? '';
        return new RegExp(w.summary).test(s) && !s.startsWith(w.not);
      }
      const th = doc.querySelector('th[aria-sort="ascending"]');
      return th !== null && (th.textContent as string).startsWith(w.sorted);
    },
    what,
    { polling: 'raf', timeout: 60_000 },
  );
}

async function timedWait(start: () => Promise<unknown>, until: () => Promise<unknown>) {
  const t0 = performance.now();
  await start();
  await until();
  return performance.now() - t0;
}

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' });
  const db = await openBenchDatabase(logger);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-ui-'));
  let browser: Browser | undefined;
  try {
    const kld = await startKld(KLD, db.url, dir);
    printMachine('ui bench');
    console.log(`database: ${db.origin}`);

    const seedStart = performance.now();
    const names = Array.from(
      { length: STATES - 1 },
      (_, i) => `bench/team-${String(i % 40).padStart(2, '0')}/state-${String(i).padStart(4, '0')}`,
    );
    for (let i = 0; i < names.length; i += 8) {
      await Promise.all(
        names.slice(i, i + 8).map((n, j) => post(`${kld.url}/v1/states/${n}`, smallState(i + j))),
      );
    }
    const big = generateBigState({ size: SIZE });
    await post(`${kld.url}/v1/states/${BIG}`, big.text);
    console.log(
      `seeded ${formatInt(STATES)} states (one of ${formatInt(bigStateInstanceCount(SIZE))} instances, ` +
        `${formatInt(big.text.length / 1024)} KiB) in ${formatMs(performance.now() - seedStart)} ms`,
    );

    const api = async (route: string) => {
      const samples: number[] = [];
      for (let i = 0; i <= REPS; i++) {
        const t0 = performance.now();
        const res = await fetch(`${kld.url}${route}`);
        await res.json();
        if (!res.ok) throw new Error(`GET ${route}: ${res.status}`);
        if (i > 0) samples.push(performance.now() - t0);
      }
      return samples;
    };
    const statesApi = await api('/v1/dashboard/states');
    const statesPageApi = await api('/v1/dashboard/states?limit=100');
    const resourcesApi = await api(`/v1/dashboard/resources?state=${BIG}&limit=100`);

    const peer = PEER ? await startKld(path.resolve(PEER), db.url, path.join(dir, 'peer')) : null;
    if (peer) console.log(`peer: ${PEER}`);
    const builds = peer ? ['', ' (peer)'] : [''];
    const uis = [kld, ...(peer ? [peer] : [])].map((k) => `${k.url}/ui/`);
    browser = await launchChromium();
    const statesFalls: Waterfall[][] = builds.map(() => []);
    const statesLoad = await measure(browser, uis, async (page, ui, b) => {
      const ms = await timedWait(
        () => page.goto(`${ui}#/states`),
        () => shows(page, { text: `${formatInt(STATES)} of ${formatInt(STATES)} states` }),
      );
      statesFalls[b].push(await waterfall(page, '/v1/dashboard/states'));
      return ms;
    });
    const statesSort = await measure(browser, uis, async (page, ui) => {
      await page.goto(`${ui}#/states`);
      await page.getByText(`of ${formatInt(STATES)} states`).waitFor();
      return timedWait(
        () => page.getByRole('button', { name: 'Instances' }).click(),
        () => shows(page, { sorted: 'Instances' }),
      );
    });
    const statesFilter = await measure(browser, uis, async (page, ui) => {
      await page.goto(`${ui}#/states`);
      await page.getByText(`of ${formatInt(STATES)} states`).waitFor();
      return timedWait(
        () => page.getByLabel('Name glob').fill('bench/team-07/*'),
        () => shows(page, { summary: '^\\d+ of [\\d,]+ states$', not: `${formatInt(STATES)} of` }),
      );
    });
    const total = formatInt(bigStateInstanceCount(SIZE));
    const resourcesFalls: Waterfall[][] = builds.map(() => []);
    const resourcesLoad = await measure(browser, uis, async (page, ui, b) => {
      const ms = await timedWait(
        () => page.goto(`${ui}#/resources/${BIG}`),
        () => shows(page, { text: `${total} instances` }),
      );
      resourcesFalls[b].push(await waterfall(page, '/v1/dashboard/resources'));
      return ms;
    });
    const resourcesNext = await measure(browser, uis, async (page, ui) => {
      await page.goto(`${ui}#/resources/${BIG}`);
      await page.getByText(`${total} instances`).waitFor();
      return timedWait(
        () => page.getByRole('button', { name: 'Next →' }).click(),
        () => shows(page, { text: `101–200 of ${total}` }),
      );
    });
    const resourcesFilter = await measure(browser, uis, async (page, ui) => {
      await page.goto(`${ui}#/resources/${BIG}`);
      await page.getByText(`${total} instances`).waitFor();
      return timedWait(
        () => page.getByLabel('Address glob').fill('*label[1234*'),
        () => shows(page, { summary: '^\\d+ instances?$', not: total }),
      );
    });

    const steps: [string, number[][]][] = [
      [`States: open (${formatInt(STATES)} states)`, statesLoad],
      ['States: sort by instances', statesSort],
      ['States: filter by glob', statesFilter],
      [`Resources: open (${total} instances, page 1)`, resourcesLoad],
      ['Resources: next page', resourcesNext],
      ['Resources: address glob', resourcesFilter],
    ];
    const rows = (
      [
        ['API: GET /v1/dashboard/states (every state)', statesApi],
        ['API: GET /v1/dashboard/states?limit=100', statesPageApi],
        ['API: GET /v1/dashboard/resources (page 1)', resourcesApi],
        ...steps.flatMap(([label, perBuild]) =>
          perBuild.map((samples, b) => [`${label}${builds[b]}`, samples] as const),
        ),
      ] as const
    ).map(([label, samples]) => {
      const d = distribution(samples);
      return [
        label,
        String(d.count),
        formatMs(d.p50),
        formatMs(d.max),
        `≤ ${TARGET_MS}`,
        verdict(d.max <= TARGET_MS),
      ];
    });
    printTable(['step', 'n', 'p50 ms', 'max ms', 'target ms', ''], rows);
    console.log('\nwhere opening a page goes, by the page’s clock (ms from the navigation):');
    printTable(
      ['moment', 'n', 'p50 ms', 'max ms'],
      builds.flatMap((name, b) => [
        // The first of each is the warm-up.
        ...waterfallRows(`States${name}`, statesFalls[b].slice(1)),
        ...waterfallRows(`Resources${name}`, resourcesFalls[b].slice(1)),
      ]),
    );
    await peer?.stop();
    await kld.stop();
  } finally {
    await browser?.close();
    await killAll();
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
