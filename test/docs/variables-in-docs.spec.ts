import { codeIn, productSources, readSource, userDocs } from '../support/doc-text';

/**
 * The `KL_*` variables kld and kl read: `env.KL_X`, `env['KL_X']`, and the
 * names kept as strings (commander's `.env('KL_X')`, the limit tables).
 */
function variablesRead(): Map<string, string> {
  const read = new Map<string, string>();
  for (const file of productSources()) {
    for (const m of readSource(file).matchAll(
      /\benv(?:\.|\[')(KL_[A-Z0-9_]+)|'(KL_[A-Z0-9_]+)'/g,
    )) {
      read.set(m[1] ?? m[2], file);
    }
  }
  return read;
}

describe('the variables in the docs', () => {
  it('documents every KL_ variable kld and kl read', () => {
    const read = variablesRead();
    expect(read.size).toBeGreaterThan(40);
    const documented = new Set(
      userDocs().flatMap(({ text }) =>
        codeIn(text).flatMap((code) => [...code.matchAll(/\bKL_[A-Z0-9_]+/g)].map((m) => m[0])),
      ),
    );
    const undocumented = [...read]
      .filter(([name]) => !documented.has(name))
      .map(([name, file]) => `${name} (${file})`);
    expect(undocumented).toEqual([]);
  });
});
