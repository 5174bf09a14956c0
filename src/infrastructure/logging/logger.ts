import pino, { Logger } from 'pino';
import { redactDeep, redactUrls } from './redact';

export type { Logger };

/** DI token of the process's Logger. */
export const LOGGER = Symbol('Logger');

/**
 * The one logger: structured JSON lines in production, human-readable when
 * stdout is a terminal (KL_LOG_FORMAT overrides). Errors are serialised with
 * any URL password masked: a pg or URL error can carry a connection string
 * (in its message or, like Node's ERR_INVALID_URL, in an `input` property).
 */
export function createLogger(
  level: string = 'info',
  format: 'auto' | 'json' | 'pretty' = 'auto',
  destination?: pino.DestinationStream,
): Logger {
  const pretty =
    destination === undefined &&
    (format === 'pretty' || (format === 'auto' && process.stdout.isTTY === true));
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
      ? { transport: { target: 'pino-pretty', options: { colorize: true, destination: 1 } } }
      : {}),
  };
  return destination ? pino(options, destination) : pino(options);
}
