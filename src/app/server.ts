import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { Client } from 'pg';
import type { Config } from '../infrastructure/config/config';
import { Notifier } from '../infrastructure/postgres/notifier';
import { answerClientErrors, refuseNulInUrl } from '../infrastructure/http/client-errors';
import { crossSiteGuard } from '../infrastructure/http/cross-site.middleware';
import { ErrorFilter } from '../infrastructure/http/error.filter';
import { LosslessJsonInterceptor } from '../infrastructure/http/lossless-json.interceptor';
import { requestLog } from '../infrastructure/http/request-log.middleware';
import { requestValidationPipe } from '../infrastructure/http/request-validation';
import type { Logger } from '../infrastructure/logging/logger';
import { NestLogger } from '../infrastructure/logging/nest-logger';
import { Database } from '../infrastructure/postgres/database';
import { defaultDataDir, EmbeddedPostgres } from '../infrastructure/postgres/embedded-postgres';
import { migrate } from '../infrastructure/postgres/migrator';
import { ServingLock } from '../infrastructure/postgres/serving-lock';
import { ProjectionRunner } from '../projections/projection-runner';
import { EventsGrpcLifecycle } from './events.module';
import { KilolockModule, MaintenanceModule, Runtime } from './kilolock.module';

export interface KldServer {
  app: NestExpressApplication;
  /** Base URL the HTTP server listens on. */
  url: string;
  /** host:port of the gRPC event service; null when KL_GRPC_LISTEN is off. */
  grpcAddress: string | null;
  databaseUrl: string;
  close(): Promise<void>;
}

/** Embedded PostgreSQL (when no database URL is configured), then migrations. */
export async function openDatabase(
  config: Config,
  logger: Logger,
): Promise<{ url: string; embedded: EmbeddedPostgres | null }> {
  if (config.databaseUrl) return { url: config.databaseUrl, embedded: null };
  const dataDir = config.dataDirExplicit ? config.dataDir : defaultDataDir(config.dataDir, logger);
  const embedded = await EmbeddedPostgres.start(dataDir, logger);
  try {
    return { url: await ensureDatabase(embedded.url, 'kilolock'), embedded };
  } catch (err) {
    await embedded.stop();
    throw err;
  }
}

export async function startServer(config: Config, logger: Logger): Promise<KldServer> {
  const { url: databaseUrl, embedded } = await openDatabase(config, logger);
  const db = new Database(databaseUrl);
  const notifier = new Notifier(databaseUrl);
  let serving: ServingLock | null = null;
  const releaseStorage = async () => {
    await serving?.release();
    await notifier.close();
    await db.close();
    await embedded?.stop();
  };
  let app: NestExpressApplication;
  try {
    await migrate(databaseUrl, logger);
    serving = await ServingLock.hold(databaseUrl, logger);
    app = await NestFactory.create<NestExpressApplication>(
      KilolockModule.forRuntime({ config, logger, db, notifier }),
      { logger: new NestLogger(logger), bodyParser: false, abortOnError: false },
    );
    app.use(requestLog(logger));
    app.use(crossSiteGuard(config.allowedOrigins));
    app.use(refuseNulInUrl);
    app.useGlobalFilters(new ErrorFilter(logger));
    app.useGlobalInterceptors(new LosslessJsonInterceptor());
    app.useGlobalPipes(requestValidationPipe());
    answerClientErrors(app.getHttpServer());
    await app.listen(config.listen.port, config.listen.host);
  } catch (err) {
    await releaseStorage();
    throw err;
  }
  const runner = app.get(ProjectionRunner);
  runner.start();
  const address = app.getHttpServer().address() as { port: number };
  const host = config.listen.host.includes(':') ? `[${config.listen.host}]` : config.listen.host;
  const url = `http://${host}:${address.port}`;
  logger.info({ url }, 'kld listening');
  const grpcAddress = grpcAddressOf(app);

  let closing: Promise<void> | null = null;
  return {
    app,
    url,
    grpcAddress,
    databaseUrl,
    close: () =>
      (closing ??= (async () => {
        // Order matters: stop taking requests and let in-flight ones finish,
        // then stop projecting (ProjectionsModule), then release the database.
        await app.close();
        await releaseStorage();
      })()),
  };
}

/**
 * The projection runner with every read model registered, started on
 * nothing: for maintenance (rebuild, skip) in a process that serves nothing.
 */
export async function openMaintenance(
  runtime: Runtime,
): Promise<{ runner: ProjectionRunner; close(): Promise<void> }> {
  const context = await NestFactory.createApplicationContext(
    MaintenanceModule.forRuntime(runtime),
    { logger: new NestLogger(runtime.logger), abortOnError: false },
  );
  return { runner: context.get(ProjectionRunner), close: () => context.close() };
}

/** Where the gRPC event service listens, if it is served (the EventsModule may not be). */
function grpcAddressOf(app: NestExpressApplication): string | null {
  try {
    return app.get(EventsGrpcLifecycle, { strict: false }).address;
  } catch {
    return null;
  }
}

async function ensureDatabase(serverUrl: string, name: string): Promise<string> {
  const client = new Client({ connectionString: serverUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
