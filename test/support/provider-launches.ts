import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * A provider search path whose one provider is a wrapper that notes each
 * launch in `launchLog` and then runs the real binary: tests can say
 * "no provider was started" from the log, not from timing.
 */
export function launchRecordingMirror(options: {
  dir: string;
  source: string;
  version: string;
  binary: string;
  launchLog: string;
}): string {
  const type = options.source.split('/').pop()!;
  const platform = path.join(options.dir, options.source, options.version, 'linux_amd64');
  fs.mkdirSync(platform, { recursive: true });
  const wrapper = path.join(platform, `terraform-provider-${type}_v${options.version}`);
  fs.writeFileSync(
    wrapper,
    `#!/bin/sh\necho "$$" >> ${JSON.stringify(options.launchLog)}\nexec ${JSON.stringify(options.binary)} "$@"\n`,
    { mode: 0o755 },
  );
  return options.dir;
}

/** How many times the wrapper started its provider so far. */
export function launches(launchLog: string): number {
  try {
    return fs.readFileSync(launchLog, 'utf8').split('\n').filter(Boolean).length;
  } catch {
    return 0;
  }
}
