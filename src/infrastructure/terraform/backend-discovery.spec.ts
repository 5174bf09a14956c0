import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { discoverHttpBackend, parseStateAddress } from './backend-discovery';

describe('discoverHttpBackend', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-backend-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const record = (backend: unknown) => {
    fs.mkdirSync(path.join(dir, '.terraform'));
    fs.writeFileSync(
      path.join(dir, '.terraform', 'terraform.tfstate'),
      JSON.stringify({ version: 3, backend }),
    );
  };

  it('finds kld and the state in what terraform init recorded', async () => {
    record({
      type: 'http',
      config: {
        address: 'http://127.0.0.1:8080/v1/states/team/prod/network',
        username: 'alice',
        password: 'secret',
      },
    });
    await expect(discoverHttpBackend(dir)).resolves.toEqual({
      server: 'http://127.0.0.1:8080',
      state: 'team/prod/network',
    });
  });

  it('is null for a directory terraform never initialised', async () => {
    await expect(discoverHttpBackend(dir)).resolves.toBeNull();
  });

  it('refuses another backend, naming it', async () => {
    record({ type: 's3', config: {} });
    await expect(discoverHttpBackend(dir)).rejects.toThrow('uses the "s3" backend');
  });

  it('keeps a path prefix and decodes segments, and never keeps credentials', () => {
    expect(parseStateAddress('https://u:p@kl.example/prefix/v1/states/a/b%40c')).toEqual({
      server: 'https://kl.example/prefix',
      state: 'a/b@c',
    });
  });

  it('refuses an address that is not a kld state address without echoing credentials', () => {
    expect(() => parseStateAddress('http://u:secret@host/other/path')).toThrow(
      'not a kld state address',
    );
    expect(() => parseStateAddress('http://u:secret@host/other/path')).not.toThrow(/secret/);
  });
});
