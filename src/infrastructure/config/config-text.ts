import * as fs from 'node:fs';

/**
 * Most bytes a configuration file (kld's `--config`, kl's `.kl.toml`) may
 * hold: either names a few dozen settings at most, a few KiB. A file of
 * hundreds of MiB took 11 s and a GiB of memory before failing with a
 * message about string lengths.
 */
export const MAX_CONFIG_FILE_BYTES = 1 << 20;

/** Why a configuration file could not be read, in words (`a symlink loop`). */
export class ConfigTextError extends Error {}

/**
 * A configuration file's text, read only if it is a regular file within
 * MAX_CONFIG_FILE_BYTES; otherwise a ConfigTextError saying why in a few words.
 */
export function readConfigText(file: string): string {
  let fd: number;
  try {
    // Not blocking: a FIFO put in a config file's place would hold the open for good.
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch (err) {
    throw new ConfigTextError(openProblem(file, (err as NodeJS.ErrnoException).code));
  }
  try {
    const stat = fs.fstatSync(fd);
    if (stat.isDirectory()) throw new ConfigTextError('a directory, not a file');
    if (!stat.isFile()) throw new ConfigTextError('not a regular file');
    if (stat.size > MAX_CONFIG_FILE_BYTES) throw tooBig();
    // Read one byte past the bound: a file that grew since fstat is refused too.
    const buffer = Buffer.alloc(MAX_CONFIG_FILE_BYTES + 1);
    let length = 0;
    for (;;) {
      const n = fs.readSync(fd, buffer, length, buffer.length - length, null);
      if (n === 0) break;
      length += n;
      if (length > MAX_CONFIG_FILE_BYTES) throw tooBig();
    }
    return buffer.subarray(0, length).toString('utf8');
  } catch (err) {
    if (err instanceof ConfigTextError) throw err;
    throw new ConfigTextError((err as NodeJS.ErrnoException).code ?? (err as Error).message);
  } finally {
    fs.closeSync(fd);
  }
}

function tooBig(): ConfigTextError {
  return new ConfigTextError(
    `larger than ${MAX_CONFIG_FILE_BYTES} bytes (1 MiB), the most a configuration file may hold`,
  );
}

function openProblem(file: string, code: string | undefined): string {
  switch (code) {
    case 'ENOENT':
      return isSymlink(file) ? 'a symbolic link to no file' : 'no such file';
    case 'ELOOP':
      return 'a loop of symbolic links';
    case 'EACCES':
    case 'EPERM':
      return 'not readable';
    case 'EISDIR':
      return 'a directory, not a file';
    default:
      return code ?? 'cannot be read';
  }
}

function isSymlink(file: string): boolean {
  try {
    return fs.lstatSync(file).isSymbolicLink();
  } catch {
    return false;
  }
}

/** Whether anything is at `file`: a file, a directory or a link (a broken one too). */
export function somethingAt(file: string): boolean {
  try {
    fs.lstatSync(file);
    return true;
  } catch {
    return false;
  }
}
