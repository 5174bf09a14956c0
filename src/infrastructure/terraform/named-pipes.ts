import { execFile } from 'node:child_process';

/**
 * Makes named pipes (mode 600) at `files` with one `mkfifo`: a process of
 * its own, so one for all of them. False where they cannot be made (no
 * `mkfifo`, a file system without pipes): the caller then uses plain files.
 */
export function makeNamedPipes(files: readonly string[]): Promise<boolean> {
  return new Promise<boolean>((resolve) =>
    execFile('mkfifo', ['-m', '600', ...files], (error) => resolve(error === null)),
  );
}
