import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { CommandBus } from '@nestjs/cqrs';
import { CreateTokenCommand } from '../../application/auth/token-commands';
import { expiryFrom } from '../../infrastructure/auth/expiry';
import { NestLogger } from '../../infrastructure/logging/nest-logger';
import { EmbeddedPostgresInUseError } from '../../infrastructure/postgres/embedded-postgres';
import { Notifier } from '../../infrastructure/postgres/notifier';
import { ServerRunningError } from '../../infrastructure/postgres/serving-lock';
import { TokenAdminModule } from '../token-admin.module';
import { configuration, loggerFor, withDatabase } from './setup';

const TOKEN_ON_SERVER =
  'create it through the server instead: kl token create (needs an admin token)';

/** `kld token create`, the bootstrap: a token written straight to the database, before any token can call the API. */
export async function createToken(
  configFile: string | undefined,
  opts: { name: string; scope: string[]; expires?: string; certSubject?: string },
): Promise<void> {
  const config = configuration(configFile);
  const logger = loggerFor(config);
  try {
    await withDatabase(config, logger, async (db, url) => {
      const notifier = new Notifier(url);
      try {
        const context = await NestFactory.createApplicationContext(
          TokenAdminModule.forRuntime({ config, logger, db, notifier }),
          { logger: new NestLogger(logger), abortOnError: false },
        );
        try {
          const created = await context.get(CommandBus).execute(
            new CreateTokenCommand({
              name: opts.name,
              scopes: opts.scope,
              expiresAt: opts.expires === undefined ? null : expiryFrom(opts.expires, new Date()),
              certSubject: opts.certSubject ?? null,
              caller: { actor: 'kld token create', correlationId: 'kld-token-create' },
            }),
          );
          const what =
            created.certSubject === null
              ? 'token'
              : `identity for certificate "${created.certSubject}"`;
          process.stderr.write(
            `kld: ${what} "${created.name}" created with scopes ${created.scopes.join(' ')}` +
              `${created.expiresAt ? `, expiring ${created.expiresAt}` : ''}` +
              `${created.secret ? '; the secret below is shown only now' : ''}\n`,
          );
          if (created.secret) process.stdout.write(`${created.secret}\n`);
        } finally {
          await context.close();
        }
      } finally {
        await notifier.close();
      }
    });
  } catch (err) {
    if (err instanceof EmbeddedPostgresInUseError) {
      throw new ServerRunningError(`${err.message}; ${TOKEN_ON_SERVER}`);
    }
    throw err;
  }
}
