import * as fs from 'node:fs';
import Module from 'node:module';

/**
 * Preloaded into a kld process (`node -r …/module-load-preload.js`): times
 * every `require` of a package from kld's own code, and when the process
 * exits writes to `$KL_BENCH_MODULES_OUT.<pid>` (else stderr) one line per package:
 * the time that require took (its package and whatever it loaded first,
 * nested), and the packages loaded while it ran. An ES module package
 * (Nest 12, @nestjs/swagger) is loaded whole by Node's require(esm) in the
 * one call, its own imports included.
 */
const moduleLoader = Module as unknown as {
  _load(request: string, parent: { filename?: string } | undefined, isMain: boolean): unknown;
};
const load = moduleLoader._load;
const packageOf = (file: string | undefined) =>
  file ? (/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file)?.[1] ?? null) : null;

interface Timed {
  name: string;
  ms: number;
  pulled: Set<string>;
}
const timed: Timed[] = [];
const seen = new Set<string>();
let current: Timed | null = null;
const started = performance.now();

moduleLoader._load = function (request, parent, isMain) {
  const fromOurs = parent?.filename !== undefined && packageOf(parent.filename) === null;
  const bare = !request.startsWith('.') && !request.startsWith('/') && !request.includes(':');
  if (current !== null || !fromOurs || !bare) return load.call(this, request, parent, isMain);
  const entry: Timed = { name: request, ms: 0, pulled: new Set() };
  current = entry;
  const t0 = performance.now();
  try {
    return load.call(this, request, parent, isMain);
  } finally {
    entry.ms = performance.now() - t0;
    current = null;
    noteLoaded(entry);
    if (entry.pulled.size > 0) timed.push(entry);
  }
};

/** Packages in require.cache not seen before, credited to the require that just ran. */
function noteLoaded(entry: Timed): void {
  for (const file of Object.keys(require.cache)) {
    if (seen.has(file)) continue;
    seen.add(file);
    const name = packageOf(file);
    if (name !== null) entry.pulled.add(name);
  }
}

process.on('exit', () => {
  const lines = timed
    .sort((a, b) => b.ms - a.ms)
    .map(
      (t) =>
        `${t.ms.toFixed(1).padStart(8)} ms  ${t.name}` +
        `  [${[...t.pulled].filter((p) => p !== t.name).join(' ')}]`,
    );
  const total = timed.reduce((sum, t) => sum + t.ms, 0);
  const text =
    `packages required by kld's code: ${total.toFixed(0)} ms of ` +
    `${(performance.now() - started).toFixed(0)} ms alive\n${lines.join('\n')}\n`;
  const out = process.env.KL_BENCH_MODULES_OUT;
  if (out) fs.writeFileSync(`${out}.${process.pid}`, text);
  else process.stderr.write(text);
});
