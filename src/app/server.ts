import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { Express } from 'express';
import * as fs from 'node:fs';
import { Config, ConfigError, isLoopback } from '../infrastructure/config/config';
import { TokenReadModel } from '../infrastructure/auth/token-read-model';
import { Notifier } from '../infrastructure/postgres/notifier';
import { answerClientErrors, refuseNulInUrl } from '../infrastructure/http/client-errors';
import { accessRuleOf } from '../infrastructure/http/access';
import {
  CURRENT_DOCUMENT_PATH,
  CurrentDocumentRoute,
} from '../infrastructure/http/current-document-route';
import { TerraformBackendController } from '../infrastructure/http/terraform-backend.controller';
import { StateDocumentReadModel } from '../infrastructure/read-models/state-document-read-model';
import { AUTHENTICATOR, type Authenticator } from '../infrastructure/auth/authenticator';
import { securityHeaders } from '../infrastructure/http/security-headers';
import { ConnectionBudget } from '../infrastructure/http/connection-bound';
import {
  drainableConnections,
  DrainableConnections,
} from '../infrastructure/http/connection-drain';
import { crossSiteGuard } from '../infrastructure/http/cross-site.middleware';
import { ErrorFilter } from '../infrastructure/http/error.filter';
import { serveOpenApi } from '../infrastructure/http/openapi-routes';
import { LosslessJsonExpressAdapter } from '../infrastructure/http/lossless-json.adapter';
import { requestLog } from '../infrastructure/http/request-log.middleware';
import { requestValidationPipe } from '../infrastructure/http/request-validation';
import { httpMetrics } from '../infrastructure/metrics/http-metrics.middleware';
import { METRICS, PrometheusMetrics } from '../infrastructure/metrics/prometheus-metrics';
import type { Logger } from '../infrastructure/logging/logger';
import { NestLogger } from '../infrastructure/logging/nest-logger';
import { Database } from '../infrastructure/postgres/database';
import { openDatabase } from '../infrastructure/postgres/open-database';
import { migrate } from '../infrastructure/postgres/migrator';
import { ServingLock } from '../infrastructure/postgres/serving-lock';
import {
  ownConnection,
  ReadModelGuard,
  recoverReadModels,
  switchReadModelPersistence,
} from '../infrastructure/postgres/unlogged-read-models';
import { ProjectionRunner } from '../projections/projection-runner';
import { EventsGrpcLifecycle } from './events.module';
import { KilolockModule } from './kilolock.module';

/**
 * Terraform's GET of the current document as an Express route, ahead of
 * Nest's routes (registered when the app listens): current-document-route.ts.
 */
function serveCurrentDocuments(app: NestExpressApplication, errors: ErrorFilter): void {
  const route = new CurrentDocumentRoute(
    app.get(StateDocumentReadModel),
    app.get<Authenticator | null>(AUTHENTICATOR),
    errors,
    accessRuleOf(TerraformBackendController.prototype.get),
  );
  (app.getHttpAdapter().getInstance() as Express).get(CURRENT_DOCUMENT_PATH, route.handle);
}

/**
 * How long requests in flight get to finish when kld stops; then their
 * connections are closed. Well inside kld's own deadline (9 s, kld.ts) and
 * a supervisor's (docker stop and systemd kill after 10 s by default): a
 * commit needs far less, and what never ends by itself (a stream nobody
 * reads, a body that stopped coming) would otherwise hold the stop to it.
 */
const SHUTDOWN_GRACE_MS = 5_000;

export interface KldServer {
  app: NestExpressApplication;
  /** Base URL the HTTP server listens on. */
  url: string;
  /** host:port of the gRPC event service; null when KL_GRPC_LISTEN is off. */
  grpcAddress: string | null;
  databaseUrl: string;
  close(): Promise<void>;
}

export async function startServer(config: Config, logger: Logger): Promise<KldServer> {
  const { url: databaseUrl, embedded } = await openDatabase(config, logger);
  // Its own connection, when it must ask PostgreSQL what a statement reads.
  const guard = new ReadModelGuard(logger, () => ownConnection(databaseUrl));
  const db = new Database(databaseUrl, {}, guard);
  const notifier = new Notifier(databaseUrl);
  let serving: ServingLock | null = null;
  const releaseStorage = async () => {
    await serving?.release();
    await notifier.close();
    await guard.close();
    await db.close();
    await embedded?.stop();
  };
  let app: NestExpressApplication;
  let connections: DrainableConnections;
  try {
    const httpsOptions = tlsOptions(config);
    await migrate(databaseUrl, logger);
    await switchReadModelPersistence(databaseUrl, config.unloggedReadModels, logger);
    // Read models a crash emptied are found by the first connection (guard.lost).
    await guard.exempt(() => guard.learnNames(db.pool));
    await guard.exempt(() => checkAuthentication(config, db, logger));
    serving = await ServingLock.hold(databaseUrl, logger);
    app = await NestFactory.create<NestExpressApplication>(
      KilolockModule.forRuntime({ config, logger, db, notifier }),
      new LosslessJsonExpressAdapter(logger),
      {
        logger: new NestLogger(logger),
        bodyParser: false,
        abortOnError: false,
        ...(httpsOptions ? { httpsOptions } : {}),
      },
    );
    // Naming the framework (and so its version's known holes) helps no caller.
    app.disable('x-powered-by');
    app.use(requestLog(logger));
    app.use(httpMetrics(app.get<PrometheusMetrics>(METRICS)));
    app.use(securityHeaders);
    app.use(crossSiteGuard(config.allowedOrigins));
    app.use(refuseNulInUrl);
    const errors = new ErrorFilter(logger);
    app.useGlobalFilters(errors);
    serveCurrentDocuments(app, errors);
    app.useGlobalPipes(requestValidationPipe());
    answerClientErrors(app.getHttpServer());
    connections = drainableConnections(app.getHttpServer(), config.idleMs);
    connectionBudgetOf(app).watchHttp(app.getHttpServer());
    serveOpenApi(app, errors);
    await app.listen(config.listen.port, config.listen.host);
  } catch (err) {
    await releaseStorage();
    throw err;
  }
  const runner = app.get(ProjectionRunner);
  runner.start();
  let stopping = false;
  const recover = () =>
    void recoverReadModels({
      guard,
      connect: () => ownConnection(databaseUrl),
      rebuild: () => runner.rebuild(),
      stopped: () => stopping,
      logger,
    });
  guard.whenLost(recover);
  if (guard.lost) recover();
  const address = app.getHttpServer().address() as { port: number };
  const host = config.listen.host.includes(':') ? `[${config.listen.host}]` : config.listen.host;
  const url = `${config.tls ? 'https' : 'http'}://${host}:${address.port}`;
  logger.info(
    {
      url,
      auth: config.auth.enabled ? 'on' : 'off',
      clientCertificates: config.tls?.clientCaFile ? 'required' : 'no',
    },
    'kld listening',
  );
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
        stopping = true;
        connections.drain(SHUTDOWN_GRACE_MS);
        await app.close();
        connections.stop();
        await releaseStorage();
      })()),
  };
}

/** PEM files of KL_TLS_*: read once at start; a missing one stops it, naming the variable. */
function tlsOptions(config: Config) {
  if (config.tls === null) return null;
  const read = (file: string, variable: string) => {
    try {
      return fs.readFileSync(file);
    } catch (err) {
      throw new ConfigError(
        `${variable}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
  };
  const { certFile, keyFile, clientCaFile } = config.tls;
  return {
    cert: read(certFile, 'KL_TLS_CERT'),
    key: read(keyFile, 'KL_TLS_KEY'),
    minVersion: 'TLSv1.2' as const,
    // Client certificates: required and verified against this CA before any request is read.
    ...(clientCaFile === null
      ? {}
      : {
          ca: read(clientCaFile, 'KL_TLS_CLIENT_CA'),
          requestCert: true,
          rejectUnauthorized: true,
        }),
  };
}

/**
 * With authentication on, someone must be able to authenticate: a start
 * with no usable token would serve nobody (or, before tokens, everybody).
 * Serving a network without authentication must be asked for, and is logged.
 */
async function checkAuthentication(config: Config, db: Database, logger: Logger): Promise<void> {
  const listen = `${config.listen.host}:${config.listen.port}`;
  if (!config.auth.enabled) {
    if (!isLoopback(config.listen.host)) {
      logger.warn(
        { listen },
        'KL_AUTH=off: authentication is off on a non-loopback address; anyone who reaches it reads and writes every state',
      );
    }
    return;
  }
  // Tokens travel in every gRPC call's metadata: off loopback, only inside TLS.
  if (config.grpcListen !== null && !isLoopback(config.grpcListen.host) && config.tls === null) {
    throw new ConfigError(
      `KL_GRPC_LISTEN: ${config.grpcListen.host} is not loopback and gRPC would carry tokens in clear; ` +
        'set KL_TLS_CERT and KL_TLS_KEY (gRPC then serves TLS), listen on loopback, or off',
    );
  }
  if ((await new TokenReadModel(db).usableCount(new Date())) > 0) return;
  const why =
    config.auth.mode === 'on' ? 'KL_AUTH=on' : `kld listens on ${listen}, which is not loopback`;
  throw new ConfigError(
    `authentication is on (${why}) and no usable token exists: create one first with ` +
      `"kld token create --name admin --scope admin" (same KL_DATABASE_URL/KL_DATA_DIR), ` +
      `or set KL_AUTH=off to serve without authentication`,
  );
}

/** The connections both listeners share; HTTP's alone when the EventsModule is not served. */
function connectionBudgetOf(app: NestExpressApplication): ConnectionBudget {
  try {
    return app.get(ConnectionBudget, { strict: false });
  } catch {
    return new ConnectionBudget();
  }
}

/** Where the gRPC event service listens, if it is served (the EventsModule may not be). */
function grpcAddressOf(app: NestExpressApplication): string | null {
  try {
    return app.get(EventsGrpcLifecycle, { strict: false }).address;
  } catch {
    return null;
  }
}
