// Builds the web dashboard into dist/ui: one script and one stylesheet
// bundled by esbuild (Preact included, so nothing loads from a CDN), the
// page, and the example queries of docs/sql.md.
import * as esbuild from 'esbuild';
import * as fs from 'node:fs';
import * as path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const out = path.join(root, 'dist', 'ui');
fs.mkdirSync(out, { recursive: true });

await esbuild.build({
  entryPoints: { app: path.join(root, 'src/ui/main.tsx') },
  bundle: true,
  minify: true,
  format: 'iife',
  target: 'es2022',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: out,
  legalComments: 'none',
  logLevel: 'warning',
});
fs.copyFileSync(path.join(root, 'src/ui/index.html'), path.join(out, 'index.html'));
fs.writeFileSync(
  path.join(out, 'examples.json'),
  JSON.stringify(examples(fs.readFileSync(path.join(root, 'docs/sql.md'), 'utf8'))),
);

/**
 * Each statement of each ```sql block of docs/sql.md, titled by its own
 * leading `--` comment, else by the first clause of the paragraph before
 * the block.
 */
function examples(markdown) {
  const found = [];
  const re = /((?:[^\n]+\n)+)\n```sql\n([\s\S]*?)```/g;
  for (let m; (m = re.exec(markdown));) {
    const paragraph = m[1]
      .trim()
      .split('\n')
      .slice(m[1].startsWith('|') ? -1 : 0)
      .join(' ');
    const prose = paragraph.startsWith('|')
      ? ''
      : paragraph
          .split(/: |\. /)[0]
          .replace(/[`:.]/g, '')
          .trim()
          .slice(0, 90);
    const statements = m[2]
      .split(/;[ \t]*\n/)
      .map((s) => s.trim())
      .filter(Boolean);
    statements.forEach((statement, i) => {
      const lines = statement.split('\n');
      const comments = [];
      while (lines[0]?.startsWith('--')) comments.push(lines.shift().replace(/^--\s*/, ''));
      const title =
        comments.join(' ').replace(/[:.]$/, '') ||
        (prose && statements.length > 1 ? `${prose} (${i + 1})` : prose) ||
        'Example';
      found.push({ title, sql: lines.join('\n').replace(/;$/, '') });
    });
  }
  return found;
}
