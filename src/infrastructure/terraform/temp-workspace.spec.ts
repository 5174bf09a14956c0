import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { StateDocumentV4 } from '../../domain/terraform';
import { TempWorkspaces } from './temp-workspace';

/**
 * Where kl's private directories go: the test's own, to see what is left.
 * (Setting TMPDIR does not do it: Jest gives a test a copy of process.env,
 * and os.tmpdir() reads the process's own environment.)
 */
const mockTmpdir: { dir: string | null } = { dir: null };
jest.mock('node:os', () => {
  const actual = jest.requireActual<typeof import('node:os')>('node:os');
  return { ...actual, tmpdir: () => mockTmpdir.dir ?? actual.tmpdir() };
});

/** While set, removing a kl directory (either way kl may) fails with this error. */
const mockRemoval: { failure: Error | null } = { failure: null };
const mockFailing = (target: unknown) =>
  mockRemoval.failure !== null && path.basename(String(target)).startsWith('kl-apply-');
jest.mock('node:fs', () => {
  const actual = jest.requireActual<typeof import('node:fs')>('node:fs');
  return {
    ...actual,
    rmSync: (...args: Parameters<typeof actual.rmSync>) => {
      if (mockFailing(args[0])) throw mockRemoval.failure;
      return actual.rmSync(...args);
    },
  };
});
jest.mock('node:fs/promises', () => {
  const actual = jest.requireActual<typeof import('node:fs/promises')>('node:fs/promises');
  return {
    ...actual,
    rm: (...args: Parameters<typeof actual.rm>) =>
      mockFailing(args[0]) ? Promise.reject(mockRemoval.failure!) : actual.rm(...args),
  };
});

const STATE: StateDocumentV4 = {
  version: 4,
  terraform_version: '1.11.4',
  serial: 3,
  lineage: 'L',
  outputs: {},
  resources: [],
};

describe('TempWorkspaces.open with contents still being read', () => {
  let tmp: string;
  let configDir: string;
  let privateDir: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-tw-spec-'));
    configDir = path.join(tmp, 'config');
    fs.mkdirSync(path.join(configDir, 'modules', 'm'), { recursive: true });
    fs.writeFileSync(path.join(configDir, 'main.tf'), 'resource "terraform_data" "user" {}\n');
    fs.writeFileSync(path.join(configDir, 'modules', 'm', 'main.tf'), 'variable "x" {}\n');
    privateDir = path.join(tmp, 'private');
    fs.mkdirSync(privateDir);
    mockTmpdir.dir = privateDir;
  });
  afterEach(() => {
    mockRemoval.failure = null;
    mockTmpdir.dir = null;
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('writes the root files and the state once they arrive, over the copied configuration', async () => {
    let arrive!: (c: {
      rootFiles: { name: string; text: string }[];
      state: StateDocumentV4;
    }) => void;
    const contents = new Promise<Parameters<typeof arrive>[0]>((resolve) => (arrive = resolve));
    const opening = new TempWorkspaces().open(configDir, contents);
    await new Promise((resolve) => setTimeout(resolve, 20));
    arrive({
      rootFiles: [{ name: 'main.tf', text: 'resource "terraform_data" "kl" {}\n' }],
      state: STATE,
    });
    const workspace = await opening;
    try {
      expect(fs.readFileSync(path.join(workspace.dir, 'main.tf'), 'utf8')).toContain('"kl"');
      expect(fs.readFileSync(path.join(workspace.dir, 'modules', 'm', 'main.tf'), 'utf8')).toBe(
        'variable "x" {}\n',
      );
      expect(
        JSON.parse(fs.readFileSync(path.join(workspace.dir, 'terraform.tfstate'), 'utf8')),
      ).toMatchObject({ serial: 3, lineage: 'L' });
    } finally {
      await workspace.dispose();
    }
    expect(fs.readdirSync(privateDir)).toEqual([]);
  });

  it("fails with the contents' own error and leaves no directory behind", async () => {
    const failure = new Error('the server cannot be reached');
    const contents = new Promise<never>((_, reject) => setTimeout(() => reject(failure), 0));
    await expect(new TempWorkspaces().open(configDir, contents)).rejects.toBe(failure);
    expect(fs.readdirSync(privateDir)).toEqual([]);
  });

  describe('when kl cannot remove its directory', () => {
    const notEmpty = () =>
      Object.assign(new Error('ENOTEMPTY: directory not empty, rmdir'), { code: 'ENOTEMPTY' });

    it('warns, naming the directory, and does not fail: the answer of the plan or apply stays theirs', async () => {
      const warnings: string[] = [];
      const workspace = await new TempWorkspaces((w) => warnings.push(w)).open(configDir, {
        rootFiles: [{ name: 'main.tf', text: 'resource "terraform_data" "kl" {}\n' }],
        state: STATE,
      });
      mockRemoval.failure = notEmpty();
      await expect(workspace.dispose()).resolves.toBeUndefined();
      const [left] = fs.readdirSync(privateDir);
      expect(warnings).toEqual([
        expect.stringContaining(`${path.join(privateDir, left)} (ENOTEMPTY)`),
      ]);
    });

    it("fails with the contents' own error, and warns of the directory", async () => {
      const warnings: string[] = [];
      const failure = new Error('the server cannot be reached');
      mockRemoval.failure = notEmpty();
      const contents = new Promise<never>((_, reject) => setTimeout(() => reject(failure), 0));
      await expect(
        new TempWorkspaces((w) => warnings.push(w)).open(configDir, contents),
      ).rejects.toBe(failure);
      expect(warnings).toEqual([expect.stringContaining('(ENOTEMPTY)')]);
    });
  });
});
