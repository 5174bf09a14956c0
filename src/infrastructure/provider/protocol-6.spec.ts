import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { encodeMsgpack } from '../../domain/cty/cty-codec';
import { CtyJson } from '../../domain/cty/cty-type';
import { blockType } from '../../domain/cty/implied-type';
import { launchProvider } from './grpc-provider-client';
import { ProviderClient } from './provider-client';

/** Protocol 6 against the repository's TypeScript test provider (kltest). */
const KLTEST = path.resolve(__dirname, '../../../test/support/provider/terraform-provider-kltest');

jest.setTimeout(60_000);

let stateDir: string;
let client: ProviderClient;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const item = {
  id: 'item-1',
  name: 'first',
  comment: 'hello',
  tags: ['a', 'b'],
  payload: {
    value: { k: [1, 2.5], s: 'x' },
    type: ['object', { k: ['list', 'number'], s: 'string' }],
  },
  secret: 's3cr3t',
  rule: [{ port: 443, protocol: 'tcp' }],
  settings: { enabled: true, level: 2 },
};

beforeAll(async () => {
  stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-kltest-'));
  client = await launchProvider(KLTEST);
});

afterAll(async () => {
  await client?.close();
  fs.rmSync(stateDir, { recursive: true, force: true });
});

describe('protocol 6 provider (kltest)', () => {
  it('negotiates protocol 6 and reads the schema through GetProviderSchema', async () => {
    expect(client.protocolVersion).toBe(6);
    const schema = await client.getSchema();
    expect(schema.protocolVersion).toBe(6);
    expect(schema.resourceSchemas.kltest_item.version).toBe(1);
    expect(
      schema.resourceSchemas.kltest_item.block.attributes.find((a) => a.name === 'payload')?.type,
    ).toBe('dynamic');
    expect(await client.configure({ state_dir: stateDir })).toEqual([]);
  });

  it('upgrades old state, reads it back and re-encodes the bytes identically', async () => {
    fs.mkdirSync(path.join(stateDir, 'kltest_item'), { recursive: true });
    fs.writeFileSync(path.join(stateDir, 'kltest_item', 'item-1.json'), JSON.stringify(item));
    const { comment, ...v0 } = item;
    const upgraded = await client.upgradeResourceState({
      typeName: 'kltest_item',
      version: 0,
      rawState: { ...v0, note: comment },
    });
    expect(upgraded.state.value).toEqual(item);

    const read = await client.readResource({
      typeName: 'kltest_item',
      currentState: upgraded.state,
    });
    expect(read.newState.value).toEqual(item);
    const block = (await client.getSchema()).resourceSchemas.kltest_item.block;
    expect(
      Buffer.from(encodeMsgpack(blockType(block), read.newState.value)).equals(
        Buffer.from(read.newState.msgpack),
      ),
    ).toBe(true);
  });

  it('sees a changed object and a deleted one', async () => {
    const file = path.join(stateDir, 'kltest_item', 'item-1.json');
    fs.writeFileSync(file, JSON.stringify({ ...item, comment: 'changed' }));
    const changed = await client.readResource({
      typeName: 'kltest_item',
      currentState: item as CtyJson,
    });
    expect((changed.newState.value as Record<string, CtyJson>).comment).toBe('changed');
    fs.rmSync(file);
    const gone = await client.readResource({
      typeName: 'kltest_item',
      currentState: item as CtyJson,
    });
    expect(gone.newState.value).toBeNull();
  });

  it('stops, closes and leaves nothing behind', async () => {
    await client.stop();
    await client.close();
    expect(alive(client.pid!)).toBe(false);
    expect(fs.existsSync(client.socketDir)).toBe(false);
  });
});
