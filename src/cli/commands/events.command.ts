import { Command } from 'commander';
import { isErrorCode } from '../../domain/shared/error-codes';
import { KlError } from '../cli-error';
import { terminalSafeJson, visible } from '../terminal-text';
import { contextOf, integerOption, usage } from './context';

interface EventsOptions {
  from?: string;
  state?: string[];
  type?: string[];
  stream?: string[];
  follow?: boolean;
  limit?: string;
}

interface EventLine {
  position: string;
  occurredAt: string;
  actor: string;
  stream: string;
  revision: number;
  type: string;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/**
 * `kl events`: the event log, oldest first, from a position or the start;
 * with --follow it keeps printing new events as they are written. `--format
 * json` prints each event as one JSON line (NDJSON, for jq); table and csv
 * one line per event. The position of each event resumes after it (--from).
 * Control characters in events are spelled out (terminal-text.ts): JSON
 * escapes them, a line shows them.
 */
export function registerEventsCommand(program: Command): void {
  program
    .command('events')
    .description('print the event log (oldest first); --follow to keep printing new events')
    .option('--from <position>', 'start after this position (an event\'s "position"), or "end"')
    .option('--state <glob>', 'only events of these states (name or glob; repeatable)', collect)
    .option('--type <type>', 'only events of this type (repeatable)', collect)
    .option('--stream <prefix>', 'only streams starting with this (repeatable)', collect)
    .option('--follow', 'keep printing events as they are written')
    .option('--limit <n>', 'stop after this many events')
    .action(async (options: EventsOptions, command: Command) => {
      const limit = integerOption(command, options.limit, '--limit');
      if (limit === 0) usage(command, '--limit must be at least 1');
      const { client, format } = contextOf(command);
      const abort = new AbortController();
      const stop = () => abort.abort();
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      process.stdout.on('error', stop); // `| head` closed the pipe
      let header = format !== 'json';
      try {
        for await (const message of client.events(
          {
            from: options.from,
            state: options.state,
            type: options.type,
            stream: options.stream,
            follow: options.follow ?? false,
            limit,
          },
          abort.signal,
        )) {
          if (message.event === 'error') throw streamError(message.data);
          if (message.event !== undefined) continue; // caught-up, checkpoint
          if (format === 'json') {
            write(`${terminalSafeJson(message.data)}\n`);
            continue;
          }
          const e = eventOf(message.data);
          const cells = [e.position, e.occurredAt, e.actor, e.stream, e.revision, e.type].map((c) =>
            String(c ?? ''),
          );
          if (header) {
            header = false;
            write(line(['position', 'occurred_at', 'actor', 'stream', 'revision', 'type'], format));
          }
          write(line(cells, format));
        }
      } finally {
        process.off('SIGINT', stop);
        process.off('SIGTERM', stop);
      }
    });
}

function write(text: string): void {
  process.stdout.write(text);
}

function line(cells: string[], format: string): string {
  if (format === 'csv') {
    const shown = process.stdout.isTTY === true ? cells.map(visible) : cells;
    return (
      shown.map((c) => (/[",\r\n]/.test(c) ? `"${c.replace(/"/g, '""')}"` : c)).join(',') + '\r\n'
    );
  }
  return cells.map(visible).join('  ') + '\n';
}

function eventOf(data: string): EventLine {
  let e: unknown;
  try {
    e = JSON.parse(data);
  } catch {
    e = null;
  }
  if (typeof e !== 'object' || e === null || Array.isArray(e)) {
    throw new KlError(
      'SERVER.UNEXPECTED_ANSWER',
      `kld sent an event that is not a JSON object: ${data.slice(0, 80)}`,
    );
  }
  return e as EventLine;
}

/** The `event: error` kld sends when the stream cannot go on: its code and message. */
function streamError(data: string): KlError {
  try {
    const e = JSON.parse(data) as { code?: unknown; message?: unknown };
    const code = isErrorCode(e.code) ? e.code : 'SERVER.ERROR';
    return new KlError(code, `${String(e.code)}: ${String(e.message ?? data)}`);
  } catch {
    return new KlError('SERVER.UNEXPECTED_ANSWER', data);
  }
}
