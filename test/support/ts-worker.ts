import { Worker, WorkerOptions } from 'node:worker_threads';

/**
 * A worker thread running a TypeScript module of ours, as kl's `dist/` runs
 * its compiled JavaScript: Jest compiles what the test itself imports, not
 * what a new thread requires, so the thread compiles `.ts` files with swc
 * (what Jest's transform uses) as it requires them.
 */
export function tsWorker(script: string, options: WorkerOptions = {}): Worker {
  const boot = `
    const fs = require('node:fs');
    const swc = require('@swc/core');
    require.extensions['.ts'] = (module, file) => {
      const { code } = swc.transformSync(fs.readFileSync(file, 'utf8'), {
        filename: file,
        module: { type: 'commonjs' },
        jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
      });
      module._compile(code, file);
    };
    require(${JSON.stringify(script)});
  `;
  return new Worker(boot, { ...options, eval: true });
}
