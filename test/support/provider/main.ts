import { PluginStartupError, servePlugin } from './plugin-server';

servePlugin(process.env).catch((error: unknown) => {
  process.stderr.write(
    `${error instanceof PluginStartupError ? error.message : String((error as Error)?.stack ?? error)}\n`,
  );
  process.exit(1);
});
