import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { StateDocumentV4 } from '../../domain/terraform';
import { TempWorkspaces } from './temp-workspace';

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
  const savedTmpdir = process.env.TMPDIR;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-tw-spec-'));
    configDir = path.join(tmp, 'config');
    fs.mkdirSync(path.join(configDir, 'modules', 'm'), { recursive: true });
    fs.writeFileSync(path.join(configDir, 'main.tf'), 'resource "terraform_data" "user" {}\n');
    fs.writeFileSync(path.join(configDir, 'modules', 'm', 'main.tf'), 'variable "x" {}\n');
    // kl's private directories go under TMPDIR: this test's own, to see what is left.
    process.env.TMPDIR = path.join(tmp, 'private');
    fs.mkdirSync(process.env.TMPDIR);
  });
  afterEach(() => {
    // Assigning undefined would set the text "undefined".
    if (savedTmpdir === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmpdir;
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
    expect(fs.readdirSync(process.env.TMPDIR!)).toEqual([]);
  });

  it("fails with the contents' own error and leaves no directory behind", async () => {
    const failure = new Error('the server cannot be reached');
    const contents = new Promise<never>((_, reject) => setTimeout(() => reject(failure), 0));
    await expect(new TempWorkspaces().open(configDir, contents)).rejects.toBe(failure);
    expect(fs.readdirSync(process.env.TMPDIR!)).toEqual([]);
  });
});
