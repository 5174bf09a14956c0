import { Command } from 'commander';
import { expiryFrom } from '../../infrastructure/auth/expiry';
import { visible, visibleLines } from '../terminal-text';
import { contextOf } from './context';

/** `kl token create|list|revoke` (needs a token with the admin scope). */
export function registerTokenCommand(program: Command): void {
  const token = program.command('token').description('manage API tokens (needs admin)');
  token
    .command('create')
    .description('create a token; its secret is printed once, on stdout')
    .requiredOption('--name <name>', "the token's name: the actor on everything it does")
    .option(
      '--scope <scope...>',
      'read:GLOB, write:GLOB, admin, query, events or metrics (repeatable)',
      (value: string, prev: string[] = []) => [...prev, value],
    )
    .option('--expires <when>', 'a duration (90d) or a date (2027-01-31)')
    .option('--cert-subject <subject>', 'a client certificate subject (CN=ci) instead of a secret')
    .action(
      async (
        opts: { name: string; scope?: string[]; expires?: string; certSubject?: string },
        command: Command,
      ) => {
        const { client, format, print } = contextOf(command);
        const created = await client.createToken({
          name: opts.name,
          scopes: opts.scope ?? [],
          ...(opts.expires === undefined
            ? {}
            : { expires_at: expiryFrom(opts.expires, new Date()) }),
          ...(opts.certSubject === undefined ? {} : { cert_subject: opts.certSubject }),
        });
        if (format === 'json') {
          print({ columns: Object.keys(created), rows: [Object.values(created)] });
          return;
        }
        process.stderr.write(
          visibleLines(
            `kl: token "${created.name}" created with scopes ${created.scopes.join(' ')}` +
              `${created.expires_at ? `, expiring ${created.expires_at}` : ''}` +
              `${created.token ? '; the secret below is shown only now' : ''}`,
          ) + '\n',
        );
        if (created.token) process.stdout.write(`${visible(created.token)}\n`);
      },
    );
  token
    .command('list')
    .description('name, prefix, scopes, created, last used and expiry of each token')
    .option('--all', 'include revoked tokens')
    .action(async (opts: { all?: boolean }, command: Command) => {
      const { client, print } = contextOf(command);
      const tokens = await client.tokens(opts.all === true);
      print({
        columns: [
          'name',
          'prefix',
          'scopes',
          'created_at',
          'created_by',
          'last_used_at',
          'expires_at',
          ...(opts.all ? ['revoked_at'] : []),
          'cert_subject',
        ],
        rows: tokens.map((t) => [
          t.name,
          t.prefix,
          t.scopes.join(' '),
          t.created_at,
          t.created_by,
          t.last_used_at,
          t.expires_at,
          ...(opts.all ? [t.revoked_at] : []),
          t.cert_subject,
        ]),
      });
    });
  token
    .command('revoke')
    .description('revoke a token: refused by every replica from now on')
    .argument('<name>', 'the token name')
    .action(async (name: string, _opts: unknown, command: Command) => {
      const { client } = contextOf(command);
      await client.revokeToken(name);
      process.stderr.write(`kl: token "${name}" revoked\n`);
    });
}
