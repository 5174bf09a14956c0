import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium } from '../support/browser';
import { KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { oneResourceState } from '../../bench/support/one-resource-state';

// page.evaluate callbacks run in the browser and read its document (this file compiles without the DOM lib).
/* eslint-disable @typescript-eslint/no-explicit-any */
declare const document: any;
declare const sessionStorage: any;
/* eslint-enable @typescript-eslint/no-explicit-any */

/**
 * The dashboard at /ui in Debian's chromium, against one kld seeded by real
 * terraform applies (terraform_data only: nothing to install), a refresh run
 * that records drift, and a terraform lock left behind by a killed apply.
 * Screenshots go to KL_UI_SCREENSHOTS (docs/ui when refreshing the README's
 * pictures), else to a temporary folder.
 */

jest.setTimeout(180_000);

const TERRAFORM = process.env.KL_TEST_TERRAFORM ?? 'terraform';
const APP = 'ui/app';
const LOCKED = 'ui/locked';

let t: TestDatabase;
let kld: KldProcess;
let root: string;
let shots: string;
let tfEnv: NodeJS.ProcessEnv;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let runningApply: string;
const running = new Set<ChildProcess>();

interface Run {
  code: number | null;
  out: string;
}

function tf(dir: string, args: string[], timeoutMs = 90_000): Promise<Run> {
  return new Promise((resolve) => {
    // Its own process group, so a kill reaches local-exec's children too.
    const child = spawn(TERRAFORM, args, { cwd: dir, env: tfEnv, detached: true });
    running.add(child);
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    const timer = setTimeout(() => kill(child), timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code: null, out: `${out}\nspawn failed: ${err.message}` });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, out });
    });
  });
}

function kill(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // already gone
  }
}

async function ok(pending: Promise<Run>, what: string): Promise<void> {
  const r = await pending;
  if (r.code !== 0) throw new Error(`${what} failed (${r.code}):\n${r.out}`);
}

function backend(name: string): string {
  const address = `${kld.url}/v1/states/${name}`;
  return `terraform {
  backend "http" {
    address        = "${address}"
    lock_address   = "${address}"
    unlock_address = "${address}"
  }
}
`;
}

async function api<T>(method: string, route: string, body?: unknown): Promise<T> {
  const res = await fetch(`${kld.url}${route}`, {
    method,
    headers: {
      'X-Kilolock-Actor': 'nightly-refresh',
      ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

const appDir = () => path.join(root, 'app');
const lockedDir = () => path.join(root, 'locked');

function applyApp(greeting: string, password: string, tags: string[]): Promise<void> {
  return ok(
    tf(appDir(), [
      'apply',
      '-auto-approve',
      '-input=false',
      `-var=greeting=${greeting}`,
      `-var=password=${password}`,
      `-var=tags=${JSON.stringify(tags)}`,
    ]),
    `apply ${greeting}`,
  );
}

/**
 * A refresh run over the REST protocol `kl refresh` drives, finding the
 * leader drifted (every request of `api` names the actor nightly-refresh).
 */
async function recordDrift(): Promise<void> {
  const current = await api<{
    serial: number;
    resources: {
      type: string;
      name: string;
      instances: { attributes: Record<string, unknown> }[];
    }[];
  }>('GET', `/v1/states/${APP}`);
  const leader = current.resources.find((r) => r.type === 'terraform_data' && r.name === 'leader')!;
  const attrs = leader.instances[0].attributes;
  attrs.input = { value: 'changed-by-hand', type: 'string' };
  attrs.output = { value: 'changed-by-hand', type: 'string' };
  const run = await api<{ run_id: string }>('POST', '/v1/refresh-runs', { state: APP });
  await api('POST', `/v1/refresh-runs/${run.run_id}/results`, {
    results: [
      {
        address: 'terraform_data.leader',
        provider: 'provider["terraform.io/builtin/terraform"]',
        outcome: 'drifted',
        before_hash: 'before',
        after_hash: 'after',
        changed_paths: ['input', 'output'],
      },
    ],
  });
  await api('POST', `/v1/refresh-runs/${run.run_id}/finish`, {
    status: 'succeeded',
    document: { ...current, serial: current.serial + 1 },
  });
}

/**
 * Two `kl apply` runs over the apply-run API: one failed, one still running
 * and holding reservations (aborted by the Runs test, before the last apply).
 */
async function startApplyRuns(): Promise<string> {
  const { versions } = await api<{ versions: { version: number }[] }>(
    'GET',
    `/v1/api/states/${APP}/history`,
  );
  const base = versions[versions.length - 1].version;
  const failed = await api<{ run_id: string }>('POST', `/v1/api/states/${APP}/apply-runs`, {
    base_version: base,
    write: ['terraform_data.secret'],
  });
  await api('POST', `/v1/api/states/${APP}/apply-runs/${failed.run_id}/finish`, {
    status: 'failed',
    error_summary: 'terraform apply failed',
  });
  const running = await api<{ run_id: string }>('POST', `/v1/api/states/${APP}/apply-runs`, {
    base_version: base,
    write: ['module.herd.*'],
    read: ['terraform_data.leader'],
    lease_seconds: 900,
  });
  return running.run_id;
}

/** An apply killed while it holds the lock: the stale lock an operator has to clear. */
async function leaveStaleLock(): Promise<void> {
  const apply = tf(lockedDir(), ['apply', '-auto-approve', '-input=false'], 120_000);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { locks } = await api<{ locks: { name: string }[] }>('GET', '/v1/api/locks');
    if (locks.some((l) => l.name === LOCKED)) break;
    if (Date.now() > deadline) throw new Error(`terraform never locked ${LOCKED}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  for (const child of running) kill(child);
  await apply;
}

/** Polls `read` until it equals `expected` (the page re-renders after each input). */
async function eventually<T>(read: () => Promise<T>, expected: unknown, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    try {
      expect(value).toEqual(expected);
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function shot(name: string): Promise<void> {
  const file = path.join(shots, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  expect(fs.statSync(file).size).toBeGreaterThan(10_000);
}

async function open(hash: string): Promise<void> {
  await page.goto(`${kld.url}/ui/${hash}`);
}

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-ui-e2e-'));
  shots = process.env.KL_UI_SCREENSHOTS ?? path.join(root, 'screenshots');
  fs.mkdirSync(shots, { recursive: true });
  const tfrc = path.join(root, 'terraformrc.hcl');
  fs.writeFileSync(tfrc, 'disable_checkpoint = true\n');
  tfEnv = {
    ...Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('TF_') && !k.startsWith('KL_')),
    ),
    TF_CLI_CONFIG_FILE: tfrc,
    CHECKPOINT_DISABLE: '1',
    TF_IN_AUTOMATION: '1',
    TF_INPUT: '0',
    TF_HTTP_USERNAME: 'alice',
  };
  t = await createTestDatabase('kl_ui');
  [kld, browser] = await Promise.all([startKld({ KL_DATABASE_URL: t.url }), launchChromium()]);

  fs.mkdirSync(path.join(appDir(), 'herd'), { recursive: true });
  fs.writeFileSync(
    path.join(appDir(), 'main.tf'),
    `${backend(APP)}
variable "greeting" { type = string }
variable "password" {
  type      = string
  sensitive = true
}
variable "tags" { type = set(string) }
resource "terraform_data" "leader" { input = var.greeting }
resource "terraform_data" "secret" { input = var.password }
module "herd" {
  source = "./herd"
  tags   = var.tags
  leader = terraform_data.leader.output
}
`,
  );
  fs.writeFileSync(
    path.join(appDir(), 'herd', 'main.tf'),
    `variable "tags" { type = set(string) }
variable "leader" { type = string }
resource "terraform_data" "tag" {
  for_each = var.tags
  input    = "\${var.leader}-\${each.key}"
}
`,
  );
  fs.mkdirSync(lockedDir());
  fs.writeFileSync(
    path.join(lockedDir(), 'main.tf'),
    `${backend(LOCKED)}
resource "terraform_data" "slow" {
  provisioner "local-exec" { command = "sleep 60" }
}
`,
  );
  await Promise.all([
    ok(tf(appDir(), ['init', '-input=false']), 'init app'),
    ok(tf(lockedDir(), ['init', '-input=false']), 'init locked'),
  ]);
  await applyApp('hello', 's3cret-one', ['a', 'b']);
  await applyApp('bonjour', 's3cret-two', ['a', 'b', 'c']);
  await recordDrift();
  runningApply = await startApplyRuns();
  await leaveStaleLock();

  context = await browser.newContext({
    viewport: { width: 1280, height: 900 },
    acceptDownloads: true,
  });
  page = await context.newPage();
});

afterAll(async () => {
  for (const child of running) kill(child);
  await context?.close();
  await browser?.close();
  await kld?.stop();
  await t?.drop();
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

describe('States', () => {
  it('lists every state with version, instances, last writer, lock holder and drift', async () => {
    await open('#/states');
    const app = page.getByRole('row').filter({ has: page.getByRole('link', { name: APP }) });
    await expect(app.locator('td[data-label="Version"]').textContent()).resolves.toBe('3');
    await expect(app.locator('td[data-label="Instances"]').textContent()).resolves.toBe('5');
    await expect(app.locator('td[data-label="Last write"]').textContent()).resolves.toMatch(
      /^nightly-refresh \(refresh\)/,
    );
    await expect(app.locator('td[data-label="Drift"]').textContent()).resolves.toBe('1 drifted');
    await expect(app.locator('td[data-label="Lock / runs"]').textContent()).resolves.toBe(
      ' 1 apply run: nightly-refresh',
    );
    const locked = page.getByRole('row').filter({ has: page.getByRole('link', { name: LOCKED }) });
    await expect(locked.locator('td[data-label="Lock / runs"]').textContent()).resolves.toMatch(
      /^locked by \S+ (just now|\d+ s ago) $/,
    );
    await expect(locked.locator('td[data-label="Last write"]').textContent()).resolves.toBe(
      'never written',
    );
    await shot('states');
  });

  it('filters by a name glob and sorts by a column', async () => {
    await open('#/states');
    await page.getByRole('link', { name: APP }).waitFor();
    const names = () => page.locator('tbody td[data-label="State"]').allTextContents();
    await page.getByLabel('Name glob').fill('ui/l*');
    await eventually(names, [LOCKED]);
    await page.getByLabel('Name glob').fill('');
    await eventually(names, [APP, LOCKED]);
    await page.getByRole('button', { name: 'Instances' }).click();
    await page.getByRole('button', { name: 'Instances' }).click();
    await eventually(() => page.locator('th[aria-sort="descending"]').textContent(), 'Instances ▾');
    await eventually(names, [APP, LOCKED]);
    await page.getByRole('button', { name: 'State', exact: true }).click();
    await eventually(names, [APP, LOCKED]);
    await page.getByRole('button', { name: 'State', exact: true }).click();
    await eventually(names, [LOCKED, APP]);
    // At 1280 px the headers sort; the phone's select is not shown.
    await expect(page.getByLabel('Sort by').isVisible()).resolves.toBe(false);
    await page.getByLabel('Name glob').fill('nothing/*');
    await page.getByText('No state name matches “nothing/*”.').waitFor();
  });

  it('fits a phone screen, and the keyboard reaches the navigation first', async () => {
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    await phone.goto(`${kld.url}/ui/#/states`);
    await phone.getByRole('link', { name: APP }).waitFor();
    const width = await phone.evaluate(() => document.documentElement.scrollWidth);
    expect(width).toBeLessThanOrEqual(390);
    await phone.keyboard.press('Tab');
    await expect(phone.evaluate(() => document.activeElement?.textContent)).resolves.toBe(
      'Skip to content',
    );
    await phone.keyboard.press('Tab');
    await phone.keyboard.press('Tab');
    await expect(phone.evaluate(() => document.activeElement?.textContent)).resolves.toBe('States');
    // The rows are cards and the sortable headers are hidden: a select sorts instead.
    const names = () => phone.locator('tbody td[data-label="State"]').allTextContents();
    const headers = await phone.locator('thead').boundingBox();
    expect(headers!.width).toBeLessThanOrEqual(1);
    const sortBy = phone.getByLabel('Sort by');
    await expect(sortBy.inputValue()).resolves.toBe('name:asc');
    await sortBy.selectOption({ label: 'State, Z to A first' });
    await eventually(names, [LOCKED, APP]);
    await sortBy.selectOption({ label: 'Instances, highest first' });
    await eventually(names, [APP, LOCKED]);
    expect(new URL(phone.url()).hash).toBe('#/states?sort=instances&desc=1');
    await phone.screenshot({ path: path.join(shots, 'states-phone.png'), fullPage: true });
    await phone.close();
  });
});

describe('State', () => {
  it('shows the history timeline with instance changes and the count chart', async () => {
    // The counts are held back at first: until they arrive a row must not claim "none".
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const isChanges = (url: URL) => url.pathname === '/v1/dashboard/changes';
    await page.route(isChanges, async (route) => {
      await held;
      await route.continue();
    });
    await open(`#/state/${APP}`);
    const rows = page.locator('table.timeline tbody tr');
    await rows.first().waitFor();
    await expect(rows.count()).resolves.toBe(3);
    const cells = async (i: number) =>
      (await rows.nth(i).locator('td').allTextContents()).slice(0, 6).join(' | ');
    await expect(cells(0)).resolves.toMatch(
      /^3 \| 3 \| refresh \| nightly-refresh \| .* \| … \(5\)$/,
    );
    release();
    await page.unrouteAll({ behavior: 'wait' }); // once the held request went on
    // Newest first: the refresh changed the leader; apply 2 changed the leader, the secret and
    // both tags (their input follows the leader) and added tag c; apply 1 created everything.
    // The counts come with a second request: until it answers a row says "…", not "none".
    await eventually(
      () => cells(0),
      expect.stringMatching(/^3 \| 3 \| refresh \| nightly-refresh \| .* \| \+0 ~1 −0 \(5\)$/),
    );
    await expect(cells(1)).resolves.toMatch(/^2 \| 2 \| http \| alice \| .* \| \+1 ~4 −0 \(5\)$/);
    await expect(cells(2)).resolves.toMatch(/^1 \| 1 \| http \| alice \| .* \| \+4 ~0 −0 \(4\)$/);
    await expect(page.locator('.chart circle').count()).resolves.toBe(3);
    await shot('state');
  });

  it('diffs two versions down to the changed attribute, sensitive values masked until revealed', async () => {
    await open(`#/state/${APP}`);
    const rows = page.locator('table.timeline tbody tr');
    await rows.nth(2).getByLabel('A', { exact: true }).check();
    await rows.nth(1).getByLabel('B', { exact: true }).check();
    await page.getByText('Changes from version 1 (A) to version 2 (B)').waitFor();
    await eventually(
      () => page.locator('.diff-list li.add').allTextContents(),
      ['+ module.herd.terraform_data.tag["c"]'],
    );
    await page.getByText('~ terraform_data.leader').click();
    const leader = page.locator('li.chg', { hasText: '~ terraform_data.leader' });
    await eventually(
      () =>
        leader
          .getByRole('row', { name: /^input/ })
          .locator('td')
          .allTextContents(),
      ['"hello"', '"bonjour"'],
    );
    await page.getByText('~ terraform_data.secret').click();
    const secret = page.locator('li.chg', { hasText: '~ terraform_data.secret' });
    await eventually(
      () =>
        secret
          .getByRole('row', { name: /^input/ })
          .locator('td')
          .allTextContents(),
      ['(sensitive value)', '(sensitive value)'],
    );
    // Terraform marks only `input` of terraform_data sensitive (not the `output` it copies):
    // the page masks what terraform marked, as `terraform state show` does.
    await expect(
      secret
        .getByRole('row', { name: /^output/ })
        .locator('td')
        .allTextContents(),
    ).resolves.toEqual(['"s3cret-one"', '"s3cret-two"']);
    await shot('state-diff');
    await page.getByRole('button', { name: 'Reveal sensitive values' }).click();
    await eventually(
      () =>
        secret
          .getByRole('row', { name: /^input/ })
          .locator('td')
          .allTextContents(),
      ['"s3cret-one"', '"s3cret-two"'],
    );
  });

  it('downloads any version’s raw document', async () => {
    await open(`#/state/${APP}`);
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download version 1' }).click(),
    ]);
    expect(download.suggestedFilename()).toBe('ui_app.v1.tfstate');
    const doc = JSON.parse(fs.readFileSync(await download.path(), 'utf8'));
    expect(doc.serial).toBe(1);
    const leader = doc.resources.find((r: { name: string }) => r.name === 'leader');
    expect(leader.instances[0].attributes.input.value).toBe('hello');
  });
});

describe('Resources', () => {
  it('lists the current instances with type, module and address filters', async () => {
    await open(`#/resources/${APP}`);
    await page.getByText('5 instances').waitFor();
    await page.getByLabel('Module').selectOption('module.herd');
    await page.getByText('3 instances').waitFor();
    await eventually(
      () => page.locator('tbody td[data-label="Address"]').allTextContents(),
      [
        'module.herd.terraform_data.tag["a"]',
        'module.herd.terraform_data.tag["b"]',
        'module.herd.terraform_data.tag["c"]',
      ],
    );
    await page.getByLabel('Module').selectOption('');
    await page.getByText('2 instances').waitFor();
    await page.getByLabel('Address glob').fill('*secret');
    await page.getByText('1 instance', { exact: true }).waitFor();
    await page.getByLabel('Address glob').fill('nothing*');
    await page.getByText('No instance matches these filters.').waitFor();
    await page.getByLabel('Address glob').fill('');
    await page.getByLabel('Module').selectOption('*');
    await page.getByText('5 instances').waitFor();
    await shot('resources');
  });

  it('shows an instance with its attributes, lifecycle and dependents', async () => {
    await open(`#/resources/${APP}`);
    await page.getByRole('link', { name: 'terraform_data.leader' }).click();
    await page.getByRole('heading', { name: 'terraform_data.leader' }).waitFor();
    await expect(page.locator('table.attributes').textContent()).resolves.toContain(
      'changed-by-hand',
    );
    const lifecycles = page.locator('table', { has: page.getByText('Lifecycles, oldest first') });
    await expect(lifecycles.locator('tbody tr td:first-child').allTextContents()).resolves.toEqual([
      'v1 → v2',
      'v2 → v3',
      'v3 → now',
    ]);
    await page.getByRole('heading', { name: 'Depended on by (3)' }).waitFor();
    await expect(page.locator('.columns li').allTextContents()).resolves.toEqual([
      'module.herd.terraform_data.tag["a"]',
      'module.herd.terraform_data.tag["b"]',
      'module.herd.terraform_data.tag["c"]',
    ]);
    await expect(page.locator('.graph line').count()).resolves.toBe(3);
    await shot('instance');
    await page.getByRole('link', { name: 'module.herd.terraform_data.tag["b"]' }).click();
    await page.getByRole('heading', { name: 'Depends on (1)' }).waitFor();
    await expect(page.locator('.columns li').first().textContent()).resolves.toBe(
      'terraform_data.leader (1 instances)',
    );
  });

  it('masks sensitive attributes until revealed', async () => {
    await open(`#/instance/${APP}?address=terraform_data.secret`);
    const input = page.locator('table.attributes tr', { hasText: 'input' });
    await expect(input.locator('td').textContent()).resolves.toBe('(sensitive value)');
    await page.getByRole('button', { name: 'Reveal sensitive values' }).click();
    await expect(input.locator('td').textContent()).resolves.toContain('s3cret-two');
  });
});

describe('Drift', () => {
  it('groups drift by type and module with before/after values and the run that found it', async () => {
    await open('#/drift');
    await page.getByRole('heading', { name: 'terraform_data · (root) (1)' }).waitFor();
    const row = page.locator('.drift-list li').first();
    await expect(row.locator('p').textContent()).resolves.toMatch(
      /^terraform_data\.leader in ui\/app, found in version 3 by refresh run [0-9a-f]{8}$/,
    );
    await expect(
      row
        .getByRole('row', { name: /^input/ })
        .locator('td')
        .allTextContents(),
    ).resolves.toEqual(['"bonjour"', '"changed-by-hand"']);
    // The runs are asked for after the drift: under load they were still loading here.
    const runs = page.locator('section', { hasText: 'Refresh runs that found drift' }).last();
    await runs.getByText('nightly-refresh').waitFor();
    await expect(runs.textContent()).resolves.toMatch(
      /on ui\/app: 1 changed of 1 checked, succeeded, by nightly-refresh/,
    );
    await shot('drift');
  });
});

// A table's accessible name is its caption; matched whole, because a
// substring ("Apply runs") would also find "Reservations held by apply runs",
// whichever of the two the page happened to draw first.
const table = (caption: string) => page.getByRole('table', { name: caption, exact: true });

describe('Runs and locks', () => {
  it('lists apply runs and the reservations a running one holds, until it ends', async () => {
    // The run is aborted whatever this case finds, so the cases after it
    // do not meet its lock.
    let aborted = false;
    const abort = async () => {
      aborted = true;
      await api('POST', `/v1/api/apply-runs/${runningApply}/abort`, {});
    };
    try {
      await open('#/runs');
      const runs = table('Apply runs, newest first');
      await runs.locator('tbody tr').first().waitFor();
      await expect(runs.locator('td[data-label="Status"]').allTextContents()).resolves.toEqual([
        'running',
        'failed terraform apply failed',
      ]);
      const reservations = table('Reservations held by apply runs');
      await reservations.locator('tbody tr').first().waitFor();
      await expect(
        reservations.locator('tbody tr').evaluateAll((rows) =>
          rows.map((r) =>
            [...r.querySelectorAll('td')]
              .slice(0, 5)
              .map((td) => td.textContent)
              .join(' | '),
          ),
        ),
      ).resolves.toEqual([
        `${APP} | module.herd.* | write | ${runningApply.slice(0, 8)} | nightly-refresh`,
        `${APP} | terraform_data.leader | read | ${runningApply.slice(0, 8)} | nightly-refresh`,
      ]);
      await abort();
      await page.getByText('No apply run holds a reservation.').waitFor({ timeout: 15_000 });
      await eventually(
        () => runs.locator('td[data-label="Status"]').allTextContents(),
        ['aborted aborted by nightly-refresh', 'failed terraform apply failed'],
      );
    } finally {
      if (!aborted) await abort();
    }
  });

  it('lists refresh runs and force-unlocks a real terraform lock after a confirmation', async () => {
    await open('#/runs');
    const run = table('Refresh runs, newest first').locator('tbody tr', {
      hasText: 'nightly-refresh',
    });
    await expect(run.locator('td[data-label="Status"]').textContent()).resolves.toBe('succeeded');
    await expect(run.locator('td[data-label="Versions"]').textContent()).resolves.toBe('v2 → v3');
    const lock = table('Locks held now').locator('tbody tr', { hasText: LOCKED });
    await expect(lock.locator('td[data-label="Operation"]').textContent()).resolves.toBe(
      'OperationTypeApply',
    );
    await shot('runs');
    await lock.getByRole('button', { name: 'Force unlock…' }).click();
    const dialog = page.getByRole('dialog', { name: `Force-unlock ${LOCKED}?` });
    await dialog.waitFor();
    await shot('runs-unlock');
    // Cancel changes nothing.
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect((await api<{ locks: unknown[] }>('GET', '/v1/api/locks')).locks).toHaveLength(1);
    await lock.getByRole('button', { name: 'Force unlock…' }).click();
    await dialog.getByRole('button', { name: 'Release this lock' }).click();
    await page.getByText(/^Released lock [0-9a-f-]+ on ui\/locked\.$/).waitFor();
    await page.getByText('No state is locked.').waitFor();
    expect((await api<{ locks: unknown[] }>('GET', '/v1/api/locks')).locks).toEqual([]);
    // Terraform can take the lock again.
    const plan = await tf(lockedDir(), ['plan', '-input=false', '-detailed-exitcode']);
    expect({ code: plan.code, out: plan.out }).toEqual({ code: 2, out: expect.any(String) });
  });
});

describe('Query', () => {
  it('runs an example query from docs/sql.md and downloads the result as CSV', async () => {
    await open('#/query');
    await page.getByRole('button', { name: 'What drifted, and where' }).click();
    await expect(page.getByLabel('SQL').inputValue()).resolves.toMatch(
      /FROM current_resource_drift/,
    );
    await page.getByRole('button', { name: 'Run (Ctrl+Enter)' }).click();
    await page.getByText('1 row', { exact: true }).waitFor();
    await expect(page.locator('table.result tbody td').allTextContents()).resolves.toEqual([
      APP,
      'terraform_data.leader',
      '["input","output"]',
    ]);
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download CSV' }).click(),
    ]);
    expect(fs.readFileSync(await download.path(), 'utf8')).toBe(
      'state_name,address,changed_paths\r\nui/app,terraform_data.leader,"[""input"",""output""]"\r\n',
    );
    await shot('query');
  });

  it('shows the database’s refusal of a write', async () => {
    await open('#/query');
    await page.getByLabel('SQL').fill('DELETE FROM states');
    await page.getByLabel('SQL').press('Control+Enter');
    await expect(page.getByRole('alert').textContent()).resolves.toMatch(/QUERY\.FORBIDDEN/);
  });
});

describe('Tokens and errors', () => {
  const isStates = (url: URL) => url.pathname === '/v1/dashboard/states';
  it('asks for a token on 401 and sends it as a bearer token from then on', async () => {
    const tab = await context.newPage();
    const seen: (string | undefined)[] = [];
    const feed: (string | undefined)[] = [];
    tab.on('request', (r) => {
      if (new URL(r.url()).pathname === '/v1/events') feed.push(r.headers().authorization);
    });
    await tab.route(isStates, async (route) => {
      const auth = route.request().headers().authorization;
      seen.push(auth);
      if (auth === 'Bearer kl_test_token') return route.continue();
      await route.fulfill({
        status: 401,
        contentType: 'application/json',
        body: JSON.stringify({ error: { code: 'AUTH.REQUIRED', message: 'a token is required' } }),
      });
    });
    await tab.goto(`${kld.url}/ui/#/states`);
    const dialog = tab.getByRole('dialog', { name: 'kld wants a token' });
    await dialog.waitFor();
    await dialog.getByLabel('Token').fill('kl_test_token');
    await dialog.getByRole('button', { name: 'Use token' }).click();
    await tab.getByRole('link', { name: APP }).waitFor();
    expect(seen[0]).toBeUndefined();
    expect(seen[seen.length - 1]).toBe('Bearer kl_test_token');
    // The event feed is read with fetch, so it carries the token too (EventSource could not).
    await eventually(async () => feed[feed.length - 1], 'Bearer kl_test_token');
    await expect(tab.evaluate(() => sessionStorage.getItem('kilolock.token'))).resolves.toBe(
      'kl_test_token',
    );
    await tab.close();
  });

  it('says so when kld fails, and offers to try again', async () => {
    const tab = await context.newPage();
    await tab.route(isStates, (route) =>
      route.fulfill({
        status: 503,
        contentType: 'application/json',
        body: JSON.stringify({ error: { code: 'SERVER.UNAVAILABLE', message: 'database down' } }),
      }),
    );
    await tab.goto(`${kld.url}/ui/#/states`);
    await expect(tab.getByRole('alert').textContent()).resolves.toBe(
      'Error 503 SERVER.UNAVAILABLE: database downTry again',
    );
    await tab.unroute(isStates);
    await tab.getByRole('button', { name: 'Try again' }).click();
    await tab.getByRole('link', { name: APP }).waitFor();
    await tab.close();
  });
});

describe('Live updates over the event feed', () => {
  const isFeed = (url: URL) => url.pathname === '/v1/events';
  /** The position of the log's end now, as kld's SSE feed says it. */
  async function endPosition(): Promise<string> {
    const res = await fetch(`${kld.url}/v1/events?from=end&follow=false`);
    const body = await res.text();
    return /^id: (\S+)$/m.exec(body)![1];
  }

  it('shows a terraform apply made while the page is open, brought by the feed with polling frozen', async () => {
    // A context of its own: a page's clock is its context's.
    const frozen = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const tab = await frozen.newPage();
    try {
      const feeds: string[] = [];
      tab.on('request', (r) => {
        if (new URL(r.url()).pathname === '/v1/events') feeds.push(r.url());
      });
      // The page's clock only moves when the test moves it, and never as far as a poll (5 s):
      // whatever appears came through the event feed.
      await tab.clock.install();
      await tab.clock.pauseAt(Date.now() + 1000);
      await tab.goto(`${kld.url}/ui/#/state/${APP}`);
      const rows = tab.locator('table.timeline tbody tr');
      // The page's answers come in real time (slow under load): wait up to 30 s of it, while the
      // page's own clock moves at most 2 s in all.
      let moved = 0;
      const shown = async (n: number) => {
        const deadline = Date.now() + 30_000;
        while (Date.now() < deadline) {
          if ((await rows.count()) >= n) return;
          if (moved < 2000) {
            await tab.clock.runFor(100);
            moved += 100;
          } else {
            await new Promise((r) => setTimeout(r, 100));
          }
        }
        throw new Error(`the page never showed ${n} versions`);
      };
      await shown(3);
      await tab.locator('.live', { hasText: 'Live' }).waitFor();
      const versions = (await rows.count()) as number;
      await applyApp('hola', 's3cret-two', ['a', 'b', 'c']);
      // Real time goes on; the page's own time has advanced by at most 2 s, less than one poll.
      await shown(versions + 1);
      await expect(rows.first().locator('td').first().textContent()).resolves.toBe(
        String(versions + 1),
      );
      // One subscription, following this state only, from the moment the page opened.
      expect(feeds).toHaveLength(1);
      const url = new URL(feeds[0]);
      expect(url.searchParams.get('state')).toBe(APP);
      expect(url.searchParams.get('from')).toBe('end');
    } finally {
      await frozen.close();
    }
  });

  it('resumes after a drop from the last position it got', async () => {
    const before = await endPosition();
    const tab = await context.newPage();
    const feeds: string[] = [];
    let first = true;
    await tab.route(isFeed, async (route) => {
      feeds.push(route.request().url());
      if (!first) return route.continue();
      first = false;
      // A feed that delivers its caught-up marker and drops.
      await route.fulfill({
        status: 200,
        contentType: 'text/event-stream',
        body: `id: ${before}\nevent: caught-up\ndata: {"position":"${before}"}\n\n`,
      });
    });
    await tab.goto(`${kld.url}/ui/#/runs`);
    await eventually(async () => feeds.length, 2, 15_000);
    expect(new URL(feeds[0]).searchParams.get('from')).toBe('end');
    expect(new URL(feeds[1]).searchParams.get('from')).toBe(before);
    await tab.locator('.live', { hasText: 'Live' }).waitFor();
    await tab.close();
  });

  it('says it is offline and polls when the token may not read the feed', async () => {
    const tab = await context.newPage();
    await tab.route(isFeed, (route) =>
      route.fulfill({
        status: 403,
        contentType: 'application/json',
        body: JSON.stringify({
          error: { code: 'AUTH.FORBIDDEN', message: 'this token lacks the events scope' },
        }),
      }),
    );
    await tab.goto(`${kld.url}/ui/#/state/${APP}`);
    const rows = tab.locator('table.timeline tbody tr');
    await rows.first().waitFor();
    const versions = await rows.count();
    const indicator = tab.locator('.live');
    await indicator.filter({ hasText: 'Offline' }).waitFor();
    await expect(indicator.getAttribute('title')).resolves.toBe(
      'No event feed (this token lacks the events scope): pages ask again every 5 s.',
    );
    await applyApp('ciao', 's3cret-two', ['a', 'b', 'c']);
    await rows.nth(versions).waitFor({ timeout: 15_000 });
    await tab.close();
  });
});

describe('kld serving /ui', () => {
  it('serves only the built files, with a policy that allows nothing from elsewhere', async () => {
    const index = await fetch(`${kld.url}/ui`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-security-policy')).toMatch(
      /default-src 'none'; script-src 'self'/,
    );
    const other = await fetch(`${kld.url}/ui/..%2Fpackage.json`);
    expect(other.status).toBe(404);
    expect(await other.json()).toEqual({
      error: {
        code: 'REQUEST.NOT_FOUND',
        message: expect.stringMatching(/^no such dashboard file/),
      },
    });
  });
});

describe('the dashboard routes', () => {
  const get = async (route: string) => {
    const res = await fetch(`${kld.url}${route}`);
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    return { status: res.status, body: (await res.json()) as any };
  };

  it('page a state’s resources with the total and the values each filter can take', async () => {
    const page2 = await get(`/v1/dashboard/resources?state=${APP}&limit=2&offset=2`);
    expect(page2.status).toBe(200);
    expect(page2.body.total).toBe(5);
    expect(page2.body.rows.map((r: { address: string }) => r.address)).toEqual([
      'module.herd.terraform_data.tag["c"]',
      'terraform_data.leader',
    ]);
    expect(page2.body.facets.modules).toEqual([
      { value: '', count: 2 },
      { value: 'module.herd', count: 3 },
    ]);
    const past = await get(`/v1/dashboard/resources?state=${APP}&offset=50`);
    expect(past.body).toMatchObject({ total: 5, rows: [] });
    // The dashboard asks for the page without the facets, and for those apart.
    const bare = await get(`/v1/dashboard/resources?state=${APP}&limit=2&offset=2&facets=false`);
    expect(bare).toEqual({ status: 200, body: { ...page2.body, facets: undefined } });
    expect('facets' in bare.body).toBe(false);
    expect(await get(`/v1/dashboard/resource-facets?state=${APP}`)).toEqual({
      status: 200,
      body: { facets: page2.body.facets },
    });
  });

  it('refuse bad parameters and unknown states with an error and no data', async () => {
    const invalid = (message: RegExp) => ({
      status: 400,
      body: { error: { code: 'REQUEST.INVALID', message: expect.stringMatching(message) } },
    });
    expect(await get(`/v1/dashboard/resources?state=${APP}&limit=0`)).toEqual(
      invalid(/^limit must be an integer from 1 to 500$/),
    );
    expect(await get(`/v1/dashboard/resources?state=${APP}&offset=-1`)).toEqual(
      invalid(/^offset must be a non-negative integer$/),
    );
    expect(await get(`/v1/dashboard/resources?state=${APP}&type=a&type=b`)).toEqual(
      invalid(/^type must be a string$/),
    );
    expect(await get(`/v1/dashboard/dependencies?state=${APP}`)).toEqual(
      invalid(/^address must be a string$/),
    );
    expect(await get('/v1/dashboard/changes')).toEqual(
      invalid(/^state must be given once, as a state name$/),
    );
    expect(await get(`/v1/dashboard/resources?state=${APP}&sort=address`)).toEqual(
      invalid(/^sort is not a known member$/),
    );
    expect(await get(`/v1/dashboard/resources?state=${APP}&facets=no`)).toEqual(
      invalid(/^facets must be true or false$/),
    );
    expect(await get('/v1/dashboard/resource-facets')).toEqual(
      invalid(/^state must be given once, as a state name$/),
    );
    expect(await get('/v1/dashboard/resource-facets?state=no/such')).toEqual({
      status: 404,
      body: { error: { code: 'STATE.NOT_FOUND', message: 'no state named "no/such"' } },
    });
    expect(await get('/v1/dashboard/changes?state=no/such')).toEqual({
      status: 404,
      body: { error: { code: 'STATE.NOT_FOUND', message: 'no state named "no/such"' } },
    });
    expect(
      await get(`/v1/dashboard/dependencies?state=${APP}&address=terraform_data.nope`),
    ).toEqual({
      status: 404,
      body: {
        error: {
          code: 'RESOURCE.NOT_FOUND',
          message: 'state "ui/app" has no resource terraform_data.nope',
        },
      },
    });
  });
});

describe('States paged by kld', () => {
  const MANY = 120;
  const many = (i: number) => `ui/many/s-${String(i).padStart(3, '0')}`;
  /** Instances of the seeded state i: 1–7, so sorting by them reorders the names. */
  const instancesOf = (i: number) => 1 + ((i * 5) % 7);
  const get = async (route: string) => {
    const res = await fetch(`${kld.url}${route}`);
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    return { status: res.status, body: (await res.json()) as any };
  };
  const names = (body: { states: { name: string }[] }) => body.states.map((s) => s.name);

  function doc(i: number, instances: number, serial = 1): string {
    const attributes = (k: number) => ({ id: `${i}-${k}` });
    return JSON.stringify(
      oneResourceState({
        serial,
        count: instances,
        lineage: `ui-many-${i}`,
        name: 'n',
        attributes,
      }),
    );
  }

  async function write(name: string, body: string): Promise<void> {
    const res = await fetch(`${kld.url}/v1/states/${name}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body,
    });
    if (!res.ok) throw new Error(`POST ${name}: ${res.status} ${await res.text()}`);
  }

  beforeAll(async () => {
    for (let i = 0; i < MANY; i += 10) {
      await Promise.all(
        Array.from({ length: 10 }, (_, j) => write(many(i + j), doc(i + j, instancesOf(i + j)))),
      );
    }
  });

  it('answer every state without parameters, as before paging', async () => {
    const all = await get('/v1/dashboard/states');
    expect(all.status).toBe(200);
    const listed = names(all.body);
    expect(listed).toEqual([...listed].sort());
    expect(listed).toEqual(expect.arrayContaining([APP, many(0), many(MANY - 1)]));
    expect(all.body).toMatchObject({ total: listed.length, unfiltered: listed.length, offset: 0 });
  });

  it('answer one page, filtered by a glob and sorted, with the totals', async () => {
    const all = (await get('/v1/dashboard/states')).body.states.length;
    // Sorted by instances, most first, ties by name: what the seed makes.
    const expected = Array.from({ length: MANY }, (_, i) => i)
      .filter((i) => many(i).startsWith('ui/many/s-1'))
      .sort((a, b) => instancesOf(b) - instancesOf(a) || a - b)
      .map(many);
    const page = await get(
      '/v1/dashboard/states?glob=ui/many/s-1*&sort=instances&order=desc&limit=5&offset=5',
    );
    expect(page.status).toBe(200);
    expect(page.body).toMatchObject({ total: expected.length, unfiltered: all, offset: 5 });
    expect(names(page.body)).toEqual(expected.slice(5, 10));
    expect(page.body.states[0].instanceCount).toBe(instancesOf(Number(expected[5].slice(-3))));
    // `?` is one character; LIKE's own wildcards in a glob are plain characters.
    expect((await get('/v1/dashboard/states?glob=ui/many/s-00?')).body.total).toBe(10);
    expect((await get('/v1/dashboard/states?glob=ui/many/s-0%25')).body).toMatchObject({
      total: 0,
      states: [],
    });
    expect((await get('/v1/dashboard/states?glob=ui_many*')).body.total).toBe(0);
    // Past the end: no rows, the totals still said.
    expect((await get('/v1/dashboard/states?glob=ui/many/*&offset=500')).body).toMatchObject({
      total: MANY,
      states: [],
      offset: 500,
    });
    // The seed wrote ten states at a time, in the order of their names.
    const oldest = await get('/v1/dashboard/states?glob=ui/many/*&sort=written&limit=10');
    expect(names(oldest.body).sort()).toEqual(Array.from({ length: 10 }, (_, i) => many(i)));
    const newest = await get(
      '/v1/dashboard/states?glob=ui/many/*&sort=written&order=desc&limit=10',
    );
    expect(names(newest.body).sort()).toEqual(Array.from({ length: 10 }, (_, i) => many(110 + i)));
    // A locked state before the free ones, which go by name.
    const lock = JSON.stringify({
      ID: '6f1c1a52-0000-4000-8000-000000000001',
      Operation: 'OperationTypePlan',
      Info: '',
      Who: 'alice@ui',
      Version: '1.11.4',
      Created: new Date().toISOString(),
      Path: '',
    });
    const lockCall = (method: string) =>
      fetch(`${kld.url}/v1/states/${many(50)}`, {
        method,
        headers: { 'Content-Type': 'application/json' },
        body: lock,
      });
    expect((await lockCall('LOCK')).status).toBe(200);
    try {
      const byLock = await get('/v1/dashboard/states?glob=ui/many/*&sort=lock&order=desc&limit=3');
      expect(names(byLock.body)).toEqual([many(50), many(0), many(1)]);
    } finally {
      expect((await lockCall('UNLOCK')).status).toBe(200);
    }
  });

  it('refuse hostile paging parameters with a clear 400 and no data', async () => {
    const invalid = (message: string) => ({
      status: 400,
      body: { error: { code: 'REQUEST.INVALID', message } },
    });
    const LIMIT = 'limit must be an integer from 1 to 500';
    const SORTS = 'sort must be one of name, version, serial, instances, written, lock, drift';
    const cases: [string, string][] = [
      ['limit=0', LIMIT],
      ['limit=501', LIMIT],
      ['limit=abc', LIMIT],
      ['limit=1e3', LIMIT],
      ['limit=-1', LIMIT],
      ['limit=99999999999999999999', LIMIT],
      ['offset=-1', 'offset must be a non-negative integer'],
      ['offset=1.5', 'offset must be a non-negative integer'],
      ['sort=name;DROP%20TABLE%20states', SORTS],
      ['sort=s.name', SORTS],
      ['sort=', SORTS],
      ['order=sideways', 'order must be asc or desc'],
      ['glob=a&glob=b', 'glob must be a string'],
      [`glob=${'x'.repeat(1025)}`, 'glob is longer than 1024 bytes'],
      ['page=2', 'page is not a known member'],
      ['glob[$ne]=x', 'glob[$ne] is not a known member'],
    ];
    for (const [params, message] of cases) {
      expect([params, await get(`/v1/dashboard/states?${params}`)]).toEqual([
        params,
        invalid(message),
      ]);
    }
    expect(await get('/v1/dashboard/states?glob=%00')).toEqual(
      invalid('the request URL holds a NUL character (%00)'),
    );
    // Nothing changed: the states are all still there.
    expect((await get('/v1/dashboard/states?glob=ui/many/*')).body.total).toBe(MANY);
  });

  it('pages, filters and sorts in the browser, one page asked at a time, kept in the URL', async () => {
    const tab = await context.newPage();
    const asked: URL[] = [];
    tab.on('request', (r) => {
      const url = new URL(r.url());
      if (url.pathname === '/v1/dashboard/states') asked.push(url);
    });
    try {
      await tab.goto(`${kld.url}/ui/#/states?glob=ui/many/*`);
      const summary = tab.locator('.summary');
      const rows = () => tab.locator('tbody td[data-label="State"]').allTextContents();
      await summary.filter({ hasText: /^120 of \d+ states$/ }).waitFor();
      expect(await tab.locator('.pager span').textContent()).toBe('1–100 of 120');
      await eventually(async () => (await rows()).length, 100);
      await tab.getByRole('button', { name: 'Next →' }).click();
      await eventually(
        rows,
        Array.from({ length: 20 }, (_, i) => many(100 + i)),
      );
      expect(await tab.locator('.pager span').textContent()).toBe('101–120 of 120');
      await tab.getByRole('button', { name: 'Instances' }).click();
      await tab.getByRole('button', { name: 'Instances' }).click();
      const expected = Array.from({ length: MANY }, (_, i) => i)
        .sort((a, b) => instancesOf(b) - instancesOf(a) || a - b)
        .map(many);
      // Sorting starts again at the first page.
      await eventually(rows, expected.slice(0, 100));
      await tab.getByLabel('Name glob').fill('ui/many/s-11?');
      await eventually(
        rows,
        expected.filter((n) => n.startsWith('ui/many/s-11')),
      );
      await summary.filter({ hasText: /^10 of \d+ states$/ }).waitFor();
      // The URL holds the filter and the sort: opened again, it shows the same.
      const hash = new URL(tab.url()).hash;
      expect(Object.fromEntries(new URLSearchParams(hash.split('?')[1]))).toEqual({
        glob: 'ui/many/s-11?',
        sort: 'instances',
        desc: '1',
      });
      await tab.reload();
      await eventually(
        rows,
        expected.filter((n) => n.startsWith('ui/many/s-11')),
      );
      await expect(tab.locator('th[aria-sort="descending"]').textContent()).resolves.toBe(
        'Instances ▾',
      );
      // Every list the page asked for was one page, filtered and sorted by kld.
      expect(asked.length).toBeGreaterThan(3);
      for (const url of asked) expect(url.searchParams.get('limit')).toBe('100');
      expect(asked.at(-1)!.searchParams.get('glob')).toBe('ui/many/s-11?');
      expect(asked.at(-1)!.searchParams.get('sort')).toBe('instances');
      expect(asked.at(-1)!.searchParams.get('order')).toBe('desc');
    } finally {
      await tab.close();
    }
  });

  it('updates the page shown from the event feed, asking for that page only', async () => {
    const frozen = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const tab = await frozen.newPage();
    try {
      const asked: URL[] = [];
      tab.on('request', (r) => {
        const url = new URL(r.url());
        if (url.pathname === '/v1/dashboard/states') asked.push(url);
      });
      // No poll (5 s) can happen: the page's clock moves by at most 2 s.
      await tab.clock.install();
      await tab.clock.pauseAt(Date.now() + 1000);
      await tab.goto(`${kld.url}/ui/#/states?glob=ui/many/*&offset=100`);
      // Each wait moves the page's clock by 2 s at most (4 s in all, less than a poll), and
      // then waits in real time only.
      const until = async (check: () => Promise<boolean>, what: string) => {
        const deadline = Date.now() + 30_000;
        for (let moved = 0; Date.now() < deadline;) {
          if (await check()) return;
          if (moved < 2000) {
            await tab.clock.runFor(100);
            moved += 100;
          } else {
            await new Promise((r) => setTimeout(r, 100));
          }
        }
        throw new Error(`the page never showed ${what}`);
      };
      const cell = (name: string) =>
        tab
          .getByRole('row')
          .filter({ has: tab.getByRole('link', { name, exact: true }) })
          .locator('td[data-label="Instances"]');
      await until(async () => (await cell(many(110)).count()) === 1, many(110));
      await tab.locator('.live', { hasText: 'Live' }).waitFor();
      const before = asked.length;
      await write(many(110), doc(110, 40, 2));
      await write('ui/many/s-999', doc(999, 1));
      await until(
        async () =>
          (await tab.locator('.summary').textContent())?.startsWith('121 of ') === true &&
          (await cell(many(110)).textContent()) === '40',
        'the new version and the new state',
      );
      await expect(cell('ui/many/s-999').textContent()).resolves.toBe('1');
      expect(await tab.locator('.pager span').textContent()).toBe('101–121 of 121');
      // Asked again for the page shown, never for every state.
      expect(asked.length).toBeGreaterThan(before);
      for (const url of asked.slice(before)) {
        expect(Object.fromEntries(url.searchParams)).toEqual({
          glob: 'ui/many/*',
          offset: '100',
          limit: '100',
        });
      }
    } finally {
      await frozen.close();
    }
  });
});
