import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { MAX_CONFIG_FILE_BYTES, readConfigText } from './config-text';

let dir: string;
beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-config-text-'))));
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const at = (name: string) => path.join(dir, name);
const problem = (file: string) => {
  try {
    readConfigText(file);
  } catch (err) {
    return (err as Error).message;
  }
  return null;
};

describe('readConfigText', () => {
  it('reads a file up to the bound, and refuses one past it without reading it whole', () => {
    fs.writeFileSync(at('ok'), 'a'.repeat(MAX_CONFIG_FILE_BYTES));
    expect(readConfigText(at('ok'))).toHaveLength(MAX_CONFIG_FILE_BYTES);
    fs.writeFileSync(at('big'), '');
    fs.truncateSync(at('big'), 600 * 2 ** 20); // sparse: 600 MiB declared
    expect(problem(at('big'))).toBe(
      'larger than 1048576 bytes (1 MiB), the most a configuration file may hold',
    );
  });

  it('names what is in the way: a loop of links, a link to nothing, a directory, a FIFO, nothing', () => {
    fs.symlinkSync('loop-b', at('loop-a'));
    fs.symlinkSync('loop-a', at('loop-b'));
    fs.symlinkSync('missing', at('dangling'));
    fs.mkdirSync(at('dir'));
    execFileSync('mkfifo', [at('fifo')]);
    expect(problem(at('loop-a'))).toBe('a loop of symbolic links');
    expect(problem(at('dangling'))).toBe('a symbolic link to no file');
    expect(problem(at('dir'))).toBe('a directory, not a file');
    expect(problem(at('fifo'))).toBe('not a regular file');
    expect(problem(at('none'))).toBe('no such file');
  });
});
