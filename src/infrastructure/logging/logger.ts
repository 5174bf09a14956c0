import pino, { Logger } from 'pino';
import { redactDeep, redactUrls } from './redact';

export type { Logger };

/** DI token of the process's Logger. */
export const LOGGER = Symbol('Logger');

/**
 * The one logger: structured JSON lines in production, human-readable when
 * its output is a terminal (KL_LOG_FORMAT overrides). Errors are serialised
 * with any URL password masked: a pg or URL error can carry a connection
 * string (in its message or, like Node's ERR_INVALID_URL, in an `input`
 * property). The server logs to stdout; a command whose stdout is its
 * answer (`kld token create` prints a secret there) logs to stderr.
 */
export function createLogger(
  level: string = 'info',
  format: 'auto' | 'json' | 'pretty' = 'auto',
  destination: pino.DestinationStream | 'stdout' | 'stderr' = 'stdout',
): Logger {
  const fd = destination === 'stderr' ? 2 : 1;
  const terminal = (fd === 2 ? process.stderr : process.stdout).isTTY === true;
  const pretty =
    typeof destination === 'string' && (format === 'pretty' || (format === 'auto' && terminal));
  const options: pino.LoggerOptions = {
    level,
    base: { service: 'kld' },
    timestamp: pino.stdTimeFunctions.isoTime,
    serializers: {
      err: (err: Error) => redactDeep(pino.stdSerializers.err(err)),
      trace: (trace: unknown) => redactDeep(trace),
    },
    hooks: {
      logMethod(args, method) {
        method.apply(
          this,
          args.map((a) => (typeof a === 'string' ? redactUrls(a) : a)) as Parameters<typeof method>,
        );
      },
    },
    ...(pretty
      ? { transport: { target: 'pino-pretty', options: { colorize: true, destination: fd } } }
      : {}),
  };
  if (pretty) return pino(options);
  return pino(options, typeof destination === 'string' ? pino.destination(fd) : destination);
}
