import { Command } from 'commander';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { stateNameFrom } from '../../infrastructure/http/state-name';
import { statePath } from '../../infrastructure/rest/kld-http-client';
import { KlError } from '../cli-error';

const FILE = 'kilolock_backend.tf';

/**
 * `kl backend-config STATE [--dir DIR]`: the `backend "http"` block that
 * points terraform at this server's STATE, printed or written to
 * DIR/kilolock_backend.tf. The token is not written: it goes in
 * TF_HTTP_PASSWORD, so it never lands in a repository.
 */
export function registerBackendConfigCommand(program: Command): void {
  program
    .command('backend-config')
    .description(`print the terraform backend block for a state, or write it to DIR/${FILE}`)
    .argument('<state>', 'state name, e.g. team/prod/network')
    .option('--dir <dir>', `write ${FILE} into this terraform root module`)
    .option('--force', `replace an existing ${FILE}`)
    .action((state: string, opts: { dir?: string; force?: boolean }, command: Command) => {
      const { server } = command.optsWithGlobals<{ server: string }>();
      const text = backendBlock(server, stateNameFrom(state));
      if (opts.dir === undefined) {
        process.stdout.write(text);
        return;
      }
      if (!fs.statSync(opts.dir, { throwIfNoEntry: false })?.isDirectory()) {
        throw new KlError('REQUEST.INVALID', `--dir ${opts.dir} is not a directory`);
      }
      const file = path.join(opts.dir, FILE);
      if (fs.existsSync(file) && !opts.force) {
        throw new KlError('REQUEST.INVALID', `${file} exists; --force replaces it`);
      }
      fs.writeFileSync(file, text);
      process.stderr.write(
        `kl: wrote ${file}; export TF_HTTP_USERNAME=<you> TF_HTTP_PASSWORD=<token>, then terraform init\n`,
      );
    });
}

export function backendBlock(server: string, state: string): string {
  const base = server.replace(/\/+$/, '');
  const address = `${base}/v1/states/${statePath(state)}`;
  const tls = base.startsWith('https:')
    ? [
        '# A server certificate from a private CA: export TF_HTTP_CLIENT_CA_CERTIFICATE_PEM="$(cat ca.pem)";',
        '# client certificates: TF_HTTP_CLIENT_CERTIFICATE_PEM and TF_HTTP_CLIENT_PRIVATE_KEY_PEM.',
      ]
    : [];
  return [
    `# Kilolock state ${state} (written by kl backend-config).`,
    '# Authenticate with a token: export TF_HTTP_USERNAME=<you> TF_HTTP_PASSWORD=<token>',
    '# (terraform sends the password only with a username, which is free-form and recorded',
    '# with every change). Never write the token in this file.',
    ...tls,
    'terraform {',
    '  backend "http" {',
    `    address        = "${address}"`,
    `    lock_address   = "${address}"`,
    `    unlock_address = "${address}"`,
    '    lock_method    = "LOCK"',
    '    unlock_method  = "UNLOCK"',
    '  }',
    '}',
    '',
  ].join('\n');
}
