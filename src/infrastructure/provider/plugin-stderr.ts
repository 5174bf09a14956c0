export type PluginLogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

export interface PluginLogRecord {
  level: PluginLogLevel;
  message: string;
  /** The remaining hclog fields (`@module`, `tf_rpc`, …); empty for plain lines. */
  fields: Record<string, unknown>;
  /** Whether the line was hclog JSON rather than plain text. */
  structured: boolean;
}

export type PluginLogger = (record: PluginLogRecord) => void;

const LEVELS = new Set<string>(['trace', 'debug', 'info', 'warn', 'error']);
const MAX_LINE = 4096;

/**
 * Consumes a plugin's stderr. It must be drained: providers write megabytes
 * of trace logs there, and a full pipe blocks the plugin. Lines that matter
 * for an error report (plain text such as a Go panic, and JSON at info level
 * or above) are kept in a bounded tail.
 */
export class PluginStderr {
  private partial = '';
  private readonly tail: string[] = [];

  constructor(
    private readonly logger: PluginLogger | undefined,
    private readonly tailLines = 60,
  ) {}

  write(chunk: Buffer | string): void {
    const text = this.partial + chunk.toString();
    const lines = text.split('\n');
    this.partial = lines.pop() ?? '';
    if (this.partial.length > MAX_LINE * 4) {
      lines.push(this.partial);
      this.partial = '';
    }
    for (const line of lines) this.line(line);
  }

  end(): void {
    if (this.partial) this.line(this.partial);
    this.partial = '';
  }

  tailText(): string {
    return this.tail.join('\n');
  }

  private line(raw: string): void {
    const line = raw.replace(/\r$/, '');
    if (line.trim() === '') return;
    const record = parseHclogLine(line);
    this.logger?.(record);
    if (record.structured && (record.level === 'trace' || record.level === 'debug')) return;
    this.tail.push(line.length > MAX_LINE ? `${line.slice(0, MAX_LINE)}…` : line);
    if (this.tail.length > this.tailLines) this.tail.shift();
  }
}

export function parseHclogLine(line: string): PluginLogRecord {
  if (line.startsWith('{')) {
    try {
      const parsed: unknown = JSON.parse(line);
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
        const { '@level': level, '@message': message, ...rest } = parsed as Record<string, unknown>;
        return {
          level:
            typeof level === 'string' && LEVELS.has(level) ? (level as PluginLogLevel) : 'info',
          message: typeof message === 'string' ? message : '',
          fields: rest,
          structured: true,
        };
      }
    } catch {
      // not JSON after all: fall through to a plain line
    }
  }
  return {
    level: /panic|fatal|error/i.test(line) ? 'error' : 'info',
    message: line,
    fields: {},
    structured: false,
  };
}
