import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { KL } from '../support/kld-process';

/**
 * What `kl` loads to answer: start-up is most of a small command's time
 * (docs/performance-history.md, "`kl` start-up"), so the commands people run in loops
 * load neither Node's fetch (undici) nor TLS and crypto against an http kld.
 */

let server: http.Server;
let url: string;
let dir: string;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-startup-'));
  // Written when kl exits: the built-in modules it loaded, then the files.
  fs.writeFileSync(
    path.join(dir, 'record.js'),
    `process.on('exit', () => require('fs').writeFileSync(process.env.KL_TEST_MODULES, JSON.stringify([...process.moduleLoadList, ...Object.keys(require.cache)])));`,
  );
  server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      req.url === '/v1/query'
        ? JSON.stringify({ columns: [{ name: 'n', type: 'int4' }], rows: [[42]], truncated: false })
        : JSON.stringify({
            states: [
              {
                name: 'team/prod',
                version: 3,
                serial: 3,
                resourceCount: 1,
                instanceCount: 2,
                terraformVersion: '1.11.4',
                updatedAt: '2026-01-01T00:00:00.000Z',
                lock: null,
              },
            ],
          }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  fs.rmSync(dir, { recursive: true, force: true });
});

/** kl's stdout and the modules it loaded (async: the stub answers in this process). */
function kl(args: string[]): Promise<{ stdout: string; modules: string[] }> {
  const record = path.join(dir, `modules-${args.join('-').replace(/\W/g, '_')}.json`);
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--require', path.join(dir, 'record.js'), KL, '--server', url, ...args],
      { env: { ...process.env, KL_TOKEN: '', KL_TEST_MODULES: record } },
      (err, stdout) => {
        if (err) return reject(err);
        resolve({ stdout, modules: JSON.parse(fs.readFileSync(record, 'utf8')) as string[] });
      },
    );
  });
}

const heavy = (modules: string[]) =>
  modules.filter((m) => /undici|\bcrypto\b|\bhttps\b|\btls\b/.test(m));

it('kl states and kl query answer from an http kld without loading fetch, TLS or crypto', async () => {
  const states = await kl(['states']);
  expect(states.stdout).toContain('team/prod');
  expect(heavy(states.modules)).toEqual([]);
  const query = await kl(['--format', 'json', 'query', 'SELECT 42 AS n']);
  expect(JSON.parse(query.stdout)).toEqual([{ n: 42 }]);
  expect(heavy(query.modules)).toEqual([]);
});

it('kl --help loads no HTTP client at all', async () => {
  const help = await kl(['--help']);
  expect(help.stdout).toMatch(/Usage: kl/);
  expect(heavy(help.modules)).toEqual([]);
  expect(help.modules.filter((m) => /\bhttp\b/.test(m))).toEqual([]);
});

it('kl refresh --help loads neither the certificate library nor a .proto parser', async () => {
  // Both are for talking to a provider: X.509 for its TLS, protobufjs's
  // parser was for the plugin protocol, now read from a parsed descriptor.
  const help = await kl(['refresh', '--help']);
  expect(help.stdout).toMatch(/Usage: kl refresh/);
  const loaded = help.modules.filter((m) => m.includes('node_modules'));
  expect(loaded.length).toBeGreaterThan(0);
  expect(
    loaded.filter((m) => /@peculiar|asn1|proto-loader|protobufjs\/src\/parse/.test(m)),
  ).toEqual([]);
});
