import { Command } from 'commander';
import * as fs from 'node:fs';
import { QUERY_LIMITS } from '../../infrastructure/query/query-limits';
import { contextOf, integerOption, readFileOrStdin, usage } from './context';

interface QueryOptions {
  file?: string;
  timeout?: string;
  maxRows?: string;
  param?: string[];
}

/** `kl query`: read-only SQL over the read models (docs/sql.md). */
export function registerQueryCommand(program: Command): void {
  program
    .command('query')
    .description('run read-only SQL against the read models (see docs/sql.md)')
    .argument('[sql]', 'the SQL; "-" reads it from stdin')
    .option('-f, --file <file>', 'read the SQL from a file')
    .option(
      '--timeout <duration>',
      'statement timeout, e.g. 500ms, 10s, 2m (default 30s, at most 5m)',
    )
    .option('--max-rows <n>', 'return at most n rows (default 10000, at most 100000)')
    .option(
      '-p, --param <value>',
      'a value for $1, $2… in order (repeatable)',
      (v: string, all: string[] | undefined) => [...(all ?? []), v],
    )
    .addHelpText(
      'after',
      // Single quotes: in double quotes the shell would expand $1 before kl sees it.
      `\nExamples:\n  kl query 'SELECT type, count(*) FROM current_resources WHERE state_name = $1 GROUP BY 1' -p prod\n  kl query -f inventory.sql --format csv\n  echo 'SELECT name FROM states' | kl query -\n  kl query -- '-- SQL that starts with a dash goes after --'`,
    )
    .action(async (sqlArg: string | undefined, options: QueryOptions, command: Command) => {
      if (sqlArg !== undefined && options.file !== undefined) {
        usage(command, 'give the SQL either as an argument or with --file, not both');
      }
      if (sqlArg === undefined && options.file === undefined) {
        usage(command, 'missing SQL: give it as an argument, with --file <file>, or "-" for stdin');
      }
      if (options.file !== undefined && !fs.existsSync(options.file)) {
        usage(command, `no such file: ${options.file}`);
      }
      const sql =
        sqlArg !== undefined && sqlArg !== '-' ? sqlArg : readFileOrStdin(options.file ?? '-');
      const timeoutMs =
        options.timeout === undefined ? undefined : parseDuration(command, options.timeout);
      const maxRows = integerOption(command, options.maxRows, '--max-rows');
      if (maxRows !== undefined && (maxRows < 1 || maxRows > QUERY_LIMITS.maxMaxRows)) {
        usage(command, `--max-rows must be from 1 to ${QUERY_LIMITS.maxMaxRows}, got ${maxRows}`);
      }
      const { client, print } = contextOf(command);
      const result = await client.query({
        sql,
        params: options.param,
        max_rows: maxRows,
        timeout_ms: timeoutMs,
      });
      print({ columns: result.columns.map((c) => c.name), rows: result.rows });
      if (result.truncated) {
        process.stderr.write(
          `kl: result truncated at ${result.rows.length} rows (raise --max-rows or narrow the query)\n`,
        );
      }
    });
}

/** `500ms`, `5s`, `2m`, `1h`; a bare number is seconds. */
export function parseDuration(command: Command, text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!m) usage(command, `--timeout: expected a duration such as 500ms, 5s or 2m, got "${text}"`);
  const factor = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[
    (m[2] ?? 's') as 'ms' | 's' | 'm' | 'h'
  ];
  const ms = Math.round(Number(m[1]) * factor);
  if (ms < 1) usage(command, `--timeout must be at least 1ms, got "${text}"`);
  if (ms > QUERY_LIMITS.maxTimeoutMs) {
    usage(
      command,
      `--timeout must be at most ${QUERY_LIMITS.maxTimeoutMs / 60_000}m, got "${text}"`,
    );
  }
  return ms;
}
