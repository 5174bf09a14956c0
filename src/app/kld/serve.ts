import { boundHeapGrowth } from '../heap-growth';
import { configuration, loggerFor } from './setup';

const SHUTDOWN_DEADLINE_MS = 9_000;
const DUPLICATE_SIGNAL_MS = 1_000;

/** `kld serve`: runs until SIGTERM or SIGINT. */
export async function serve(
  configFile: string | undefined,
  opts: { listen?: string },
): Promise<void> {
  boundHeapGrowth();
  const config = configuration(configFile, opts);
  const logger = loggerFor(config, 'stdout');
  // The server (Nest, Express, gRPC: most of a start) is loaded once the
  // settings are known to be good, so a wrong one is refused at once.
  const { startServer } = await import('../server');
  const server = await startServer(config, logger);
  let stoppingSince: number | null = null;
  const stop = (signal: string) => {
    if (stoppingSince !== null) {
      // One Ctrl-C or supervisor stop often arrives twice: sent to the whole
      // process group and forwarded again by `npm start`. Only a later one
      // means "now".
      if (Date.now() - stoppingSince < DUPLICATE_SIGNAL_MS) return;
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stoppingSince = Date.now();
    logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      logger.error('shutdown took too long; exiting');
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS);
    force.unref();
    server.close().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (err) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
