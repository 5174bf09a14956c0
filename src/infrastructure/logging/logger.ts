import pino, { Logger } from 'pino';

export type { Logger };

/**
 * The one logger: structured JSON lines in production, human-readable when
 * stdout is a terminal.
 */
export function createLogger(level: string = process.env.KL_LOG_LEVEL ?? 'info'): Logger {
  const pretty = process.stdout.isTTY && process.env.KL_LOG_FORMAT !== 'json';
  return pino({
    level,
    base: { service: 'kld' },
    timestamp: pino.stdTimeFunctions.isoTime,
    ...(pretty
      ? { transport: { target: 'pino-pretty', options: { colorize: true, destination: 1 } } }
      : {}),
  });
}
