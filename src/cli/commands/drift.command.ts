import { Command } from 'commander';
import { KldHttpClient } from '../../infrastructure/rest/kld-http-client';
import { RestRefreshServer } from '../../infrastructure/refresh/rest-refresh-server';
import { Format, render } from '../render';

interface Globals {
  server: string;
  token?: string;
  format: Format;
}

/** `kl drift <state>`: resources whose last refresh found them changed and no apply has looked at since. */
export function registerDriftCommand(program: Command): void {
  program
    .command('drift')
    .description(
      'list the current drift of a state (found by kl refresh, cleared by the next apply)',
    )
    .argument('<state>', 'state name')
    .action(async (state: string, _options: unknown, command: Command) => {
      const globals = command.optsWithGlobals<Globals>();
      const server = new RestRefreshServer(
        new KldHttpClient(globals.server, { token: globals.token }),
      );
      const drift = await server.drift(state);
      process.stdout.write(
        render(
          {
            columns: ['address', 'changed_paths', 'detected_serial', 'refresh_run_id'],
            rows: drift.map((d) => [
              d.address,
              d.changed_paths,
              d.detected_serial,
              d.refresh_run_id,
            ]),
          },
          globals.format,
        ),
      );
    });
}
