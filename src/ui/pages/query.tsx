import { useState } from 'preact/hooks';
import { ApiError, postJson, saveFile } from '../api';
import { Empty, Failure, Loading } from '../components';
import { toCsv } from '../csv';
import { useApi } from '../hooks';
import type { QueryResult } from '../types';

interface Example {
  title: string;
  sql: string;
}

const MAX_ROWS = 1000;

export function QueryPage() {
  const examples = useApi<Example[]>('/ui/examples.json', false);
  const [sql, setSql] = useState(
    'SELECT state_name, type, count(*) AS instances\n  FROM current_resources\n GROUP BY 1, 2 ORDER BY 3 DESC',
  );
  const [result, setResult] = useState<QueryResult | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [running, setRunning] = useState(false);
  const run = async () => {
    setRunning(true);
    setError(null);
    try {
      setResult(await postJson<QueryResult>('/v1/query', { sql, max_rows: MAX_ROWS }));
    } catch (err) {
      setResult(null);
      setError(err as ApiError);
    } finally {
      setRunning(false);
    }
  };
  return (
    <section aria-labelledby="query-title">
      <h1 id="query-title">Query</h1>
      <p class="muted">
        Read-only SQL over the read models documented in <code>docs/sql.md</code>; at most{' '}
        {MAX_ROWS} rows here (<code>kl query</code> takes more).
      </p>
      <div class="query">
        <div>
          <label for="sql">SQL</label>
          <textarea
            id="sql"
            rows={8}
            spellcheck={false}
            value={sql}
            onInput={(e) => setSql(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
                e.preventDefault();
                void run();
              }
            }}
          />
          <div class="actions">
            <button type="button" class="primary" onClick={() => void run()} disabled={running}>
              Run <span class="hint">(Ctrl+Enter)</span>
            </button>
            {result && (
              <button
                type="button"
                onClick={() =>
                  saveFile('query.csv', new Blob([toCsv(result)], { type: 'text/csv' }))
                }
              >
                Download CSV
              </button>
            )}
          </div>
        </div>
        <aside aria-labelledby="examples-title">
          <h2 id="examples-title">Examples</h2>
          {examples.data ? (
            <ul class="examples">
              {examples.data.map((ex) => (
                <li key={ex.sql}>
                  <button type="button" class="link" onClick={() => setSql(ex.sql)} title={ex.sql}>
                    {ex.title}
                  </button>
                </li>
              ))}
            </ul>
          ) : examples.error ? (
            <Failure error={examples.error} />
          ) : (
            <Loading what="examples" />
          )}
        </aside>
      </div>
      {running && <Loading what="the result" />}
      {error && <Failure error={error} />}
      {result && !running && <ResultTable result={result} />}
    </section>
  );
}

function ResultTable({ result }: { result: QueryResult }) {
  if (result.rows.length === 0) return <Empty>The query returned no rows.</Empty>;
  return (
    <>
      <p class="summary" role="status">
        {result.rows.length} row{result.rows.length === 1 ? '' : 's'}
        {result.truncated && ` (truncated at ${MAX_ROWS})`}
      </p>
      <div class="table-wrap">
        <table class="result">
          <caption class="sr-only">Query result</caption>
          <thead>
            <tr>
              {result.columns.map((c, i) => (
                <th key={i} scope="col" title={c.type}>
                  {c.name}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {result.rows.map((row, i) => (
              <tr key={i}>
                {row.map((v, j) => (
                  <td key={j} data-label={result.columns[j]?.name}>
                    {cell(v)}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

function cell(v: unknown): string {
  if (v === null) return 'NULL';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}
