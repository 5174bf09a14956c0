import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ProviderSchemaCache } from '../../src/application/ports/provider-schema-cache.port';
import { decodeMsgpack, encodeMsgpack } from '../../src/domain/cty/cty-codec';
import { CtyJson } from '../../src/domain/cty/cty-type';
import { blockType } from '../../src/domain/cty/implied-type';
import { ProviderSchema } from '../../src/domain/cty/schema';
import { sensitivePaths } from '../../src/domain/cty/sensitive-paths';
import { toStatePath } from '../../src/domain/cty/attribute-path';
import { discoverProvider } from '../../src/infrastructure/provider/discovery';
import { ProviderClient, StateValue } from '../../src/infrastructure/provider/provider-client';
import {
  ProviderDiagnosticsError,
  ProviderError,
} from '../../src/infrastructure/provider/provider-error';
import { CachedSchemaProviderFactory } from '../../src/infrastructure/provider/provider-factory';
import { PluginLogRecord } from '../../src/infrastructure/provider/plugin-stderr';
import { Command } from 'commander';
import { registerProviderSchemaCommand } from '../../src/cli/commands/provider-schema.command';
import {
  findTerraformMirror,
  Moto,
  motoEndpointEnv,
  onPath,
  pidAlive,
  startMoto,
} from '../support/terraform-aws';

/**
 * The real AWS provider (protocol 5) against moto, with state written by a
 * real terraform. Nothing is skipped: missing tools fail the suite loudly.
 */
jest.setTimeout(240_000);

const AWS = 'hashicorp/aws';
const PARAM = '/kl-e2e/param';
const BUCKET = 'kl-e2e-bucket';

interface StateInstance {
  schema_version: number;
  attributes: Record<string, CtyJson>;
  private?: string;
  sensitive_attributes?: unknown[];
}
interface StateResource {
  type: string;
  name: string;
  instances: StateInstance[];
}

/** A cache that stores JSON text, as the PostgreSQL adapter will. */
class JsonTextCache implements ProviderSchemaCache {
  readonly entries = new Map<string, string>();
  async get(source: string, version: string): Promise<ProviderSchema | null> {
    const text = this.entries.get(`${source}@${version}`);
    return text ? (JSON.parse(text) as ProviderSchema) : null;
  }
  async put(source: string, version: string, schema: ProviderSchema): Promise<void> {
    this.entries.set(`${source}@${version}`, JSON.stringify(schema));
  }
}

let work: string;
let mirror: string;
let moto: Moto | null = null;
let endpoint: string;
let tfEnv: NodeJS.ProcessEnv;
let resources: Map<string, StateResource>;
const clients: ProviderClient[] = [];
const rpcLog: { rpc: string }[] = [];
const timings: Record<string, number> = {};
const cache = new JsonTextCache();

function factory(): CachedSchemaProviderFactory {
  return new CachedSchemaProviderFactory(cache, {
    env: { AWS_EC2_METADATA_DISABLED: 'true' },
    logger: (r: PluginLogRecord) => {
      if (r.message === 'Received request' && typeof r.fields.tf_rpc === 'string') {
        rpcLog.push({ rpc: r.fields.tf_rpc });
      }
    },
  });
}

function awsCli(...args: string[]): string {
  return execFileSync('aws', ['--endpoint-url', endpoint, ...args], {
    env: {
      ...process.env,
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
      AWS_DEFAULT_REGION: 'us-east-1',
    },
    encoding: 'utf8',
  });
}

function providerConfig(): CtyJson {
  return {
    region: 'us-east-1',
    access_key: 'test',
    secret_key: 'test',
    skip_credentials_validation: true,
    skip_requesting_account_id: true,
    skip_metadata_api_check: 'true',
    skip_region_validation: true,
    s3_use_path_style: true,
    endpoints: [{ s3: endpoint, ssm: endpoint, sts: endpoint, iam: endpoint }],
  };
}

function instance(address: string): StateInstance {
  const r = resources.get(address);
  if (!r) throw new Error(`terraform state has no ${address}`);
  return r.instances[0];
}

async function refresh(client: ProviderClient, address: string): Promise<StateValue> {
  const [type] = address.split('.');
  const inst = instance(address);
  const upgraded = await client.upgradeResourceState({
    typeName: type,
    version: inst.schema_version,
    rawState: inst.attributes,
  });
  const t0 = performance.now();
  const read = await client.readResource({
    typeName: type,
    currentState: upgraded.state,
    private: inst.private ? Buffer.from(inst.private, 'base64') : undefined,
  });
  timings[`readResource ${type}`] = Math.round(performance.now() - t0);
  return read.newState;
}

beforeAll(async () => {
  onPath('terraform');
  onPath('aws');
  mirror = findTerraformMirror();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-e2e-aws-'));
  moto = await startMoto();
  endpoint = moto.endpoint;

  const tfrc = path.join(work, 'terraform.rc');
  fs.writeFileSync(
    tfrc,
    `provider_installation {\n  filesystem_mirror {\n    path = ${JSON.stringify(mirror)}\n  }\n}\n`,
  );
  const tfDir = path.join(work, 'tf');
  fs.mkdirSync(tfDir);
  fs.writeFileSync(
    path.join(tfDir, 'main.tf'),
    `terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = "5.100.0" }
  }
}
# The endpoints come from AWS_ENDPOINT_URL (motoEndpointEnv says why).
provider "aws" {
  access_key                  = "test"
  secret_key                  = "test"
  region                      = "us-east-1"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  s3_use_path_style           = true
}
resource "aws_ssm_parameter" "p" {
  name  = "${PARAM}"
  type  = "String"
  value = "v1"
}
resource "aws_s3_bucket" "b" {
  bucket = "${BUCKET}"
}
resource "aws_s3_bucket_versioning" "b" {
  bucket = aws_s3_bucket.b.id
  versioning_configuration {
    status = "Enabled"
  }
}
`,
  );
  tfEnv = {
    ...process.env,
    TF_CLI_CONFIG_FILE: tfrc,
    CHECKPOINT_DISABLE: '1',
    TF_IN_AUTOMATION: '1',
    ...motoEndpointEnv(moto),
  };
  delete tfEnv.TF_PLUGIN_CACHE_DIR;
  delete tfEnv.TF_DATA_DIR;
  const tf = (...args: string[]): string =>
    execFileSync('terraform', args, {
      cwd: tfDir,
      env: tfEnv,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  tf('init', '-input=false', '-no-color');
  tf('apply', '-auto-approve', '-input=false', '-no-color');
  // Compare against what a Terraform read of the same objects stores, not against the apply result.
  tf('apply', '-refresh-only', '-auto-approve', '-input=false', '-no-color');
  const state = JSON.parse(fs.readFileSync(path.join(tfDir, 'terraform.tfstate'), 'utf8')) as {
    resources: StateResource[];
  };
  resources = new Map(state.resources.map((r) => [`${r.type}.${r.name}`, r]));
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await moto?.stop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
  if (Object.keys(timings).length > 0)
    console.log(`provider e2e timings (ms): ${JSON.stringify(timings)}`);
});

describe('AWS provider 5.100.0 (protocol 5) against moto', () => {
  let client: ProviderClient;
  let schema: ProviderSchema;

  it('discovers the provider in the mirror and through terraform init with its lock-file pin', () => {
    const fromMirror = discoverProvider(AWS, { searchPaths: [mirror], env: {}, lockFile: null });
    expect(fromMirror).toMatchObject({
      source: 'registry.terraform.io/hashicorp/aws',
      version: '5.100.0',
      searchPath: path.resolve(mirror),
    });
    expect(path.basename(fromMirror.binary)).toMatch(/^terraform-provider-aws_v5\.100\.0_x5$/);

    const fromInit = discoverProvider('registry.terraform.io/hashicorp/aws', {
      cwd: path.join(work, 'tf'),
      env: {},
      homeDir: work,
    });
    expect(fromInit).toMatchObject({ version: '5.100.0', versionFrom: 'lock-file' });
    expect(fromInit.searchPath).toBe(path.join(work, 'tf', '.terraform', 'providers'));
  });

  it('launches, gets the schema and configures with every attribute present', async () => {
    const t0 = performance.now();
    const opened = await factory().open(AWS, { searchPaths: [mirror], env: {}, lockFile: null });
    timings['launch+getSchema'] = Math.round(performance.now() - t0);
    client = opened.client;
    clients.push(client);
    schema = opened.schema;
    expect(opened.schemaFromCache).toBe(false);
    expect(client.protocolVersion).toBe(5);
    expect(rpcLog.filter((r) => r.rpc === 'GetProviderSchema')).toHaveLength(1);
    for (const type of ['aws_ssm_parameter', 'aws_s3_bucket', 'aws_s3_bucket_versioning']) {
      expect(schema.resourceSchemas[type].version).toBe(
        instance(`${type}.${type === 'aws_ssm_parameter' ? 'p' : 'b'}`).schema_version,
      );
    }

    const provider = schema.provider.block;
    const config = providerConfig();
    const sent = encodeMsgpack(blockType(provider), config);
    const decoded = decodeMsgpack(blockType(provider), sent) as Record<string, CtyJson>;
    expect(Object.keys(decoded).sort()).toEqual(
      [
        ...provider.attributes.map((a) => a.name),
        ...provider.blockTypes.map((b) => b.typeName),
      ].sort(),
    );
    const endpoints = (decoded.endpoints as Record<string, CtyJson>[])[0];
    const endpointsBlock = provider.blockTypes.find((b) => b.typeName === 'endpoints')!.block;
    expect(Object.keys(endpoints)).toHaveLength(endpointsBlock.attributes.length);
    expect(endpoints.ssm).toBe(endpoint);
    expect(endpoints.dynamodb).toBeNull();
    expect(decoded.assume_role).toEqual([]);

    const t1 = performance.now();
    const diagnostics = await client.configure(config);
    timings.configure = Math.round(performance.now() - t1);
    expect(diagnostics.filter((d) => d.severity === 'error')).toEqual([]);
  });

  it.each(['aws_ssm_parameter.p', 'aws_s3_bucket.b', 'aws_s3_bucket_versioning.b'])(
    'refreshes %s to exactly what terraform wrote, and re-encodes its bytes identically',
    async (address) => {
      const newState = await refresh(client, address);
      expect(newState.value).toEqual(instance(address).attributes);
      const block = schema.resourceSchemas[address.split('.')[0]].block;
      const reencoded = encodeMsgpack(blockType(block), newState.value);
      expect(Buffer.from(reencoded).toString('hex')).toBe(
        Buffer.from(newState.msgpack).toString('hex'),
      );
    },
  );

  it('derives the sensitive paths terraform recorded', () => {
    const inst = instance('aws_ssm_parameter.p');
    const ours = sensitivePaths(
      schema.resourceSchemas.aws_ssm_parameter.block,
      inst.attributes,
    ).map(toStatePath);
    expect(new Set(ours.map((p) => JSON.stringify(p)))).toEqual(
      new Set((inst.sensitive_attributes ?? []).map((p) => JSON.stringify(p))),
    );
  });

  it('sees out-of-band changes', async () => {
    awsCli(
      'ssm',
      'put-parameter',
      '--name',
      PARAM,
      '--value',
      'v2-changed-out-of-band',
      '--type',
      'String',
      '--overwrite',
    );
    const param = (await refresh(client, 'aws_ssm_parameter.p')).value as Record<string, CtyJson>;
    expect([param.value, param.version]).toEqual(['v2-changed-out-of-band', 2]);

    const before = instance('aws_s3_bucket_versioning.b').attributes
      .versioning_configuration as Record<string, CtyJson>[];
    expect(before[0].status).toBe('Enabled');
    awsCli(
      's3api',
      'put-bucket-versioning',
      '--bucket',
      BUCKET,
      '--versioning-configuration',
      'Status=Suspended',
    );
    const versioning = (await refresh(client, 'aws_s3_bucket_versioning.b')).value as Record<
      string,
      CtyJson
    >;
    expect(versioning.versioning_configuration).toEqual([{ ...before[0], status: 'Suspended' }]);
  });

  it('imports an existing bucket by id', async () => {
    const imported = await client.importResourceState('aws_s3_bucket', BUCKET);
    expect(imported.resources.map((r) => r.typeName)).toEqual(['aws_s3_bucket']);
    expect((imported.resources[0].state.value as Record<string, CtyJson>).id).toBe(BUCKET);
  });

  it('acknowledges Stop and keeps serving', async () => {
    await client.stop();
    const bucket = await refresh(client, 'aws_s3_bucket.b');
    expect((bucket.value as Record<string, CtyJson>).bucket).toBe(BUCKET);
  });

  it('reads a resource deleted out of band as a null new state', async () => {
    awsCli('ssm', 'delete-parameter', '--name', PARAM);
    const gone = await refresh(client, 'aws_ssm_parameter.p');
    expect(gone.value).toBeNull();
    expect(Buffer.from(gone.msgpack).toString('hex')).toBe('c0');
  });

  it('refuses a resource type the provider does not have', async () => {
    await expect(
      client.readResource({ typeName: 'aws_no_such_thing', currentState: {} }),
    ).rejects.toMatchObject({
      code: 'PROVIDER.UNKNOWN_TYPE',
    });
  });

  it('serves the schema from the cache on a second run: no GetSchema call at all', async () => {
    const before = rpcLog.filter((r) => r.rpc === 'GetProviderSchema').length;
    const t0 = performance.now();
    const opened = await factory().open(AWS, { searchPaths: [mirror], env: {}, lockFile: null });
    timings['launch (cached schema)'] = Math.round(performance.now() - t0);
    clients.push(opened.client);
    expect(opened.schemaFromCache).toBe(true);
    await opened.client.configure(providerConfig());
    const bucket = await refresh(opened.client, 'aws_s3_bucket.b');
    expect((bucket.value as Record<string, CtyJson>).bucket).toBe(BUCKET);
    expect(rpcLog.filter((r) => r.rpc === 'GetProviderSchema').length).toBe(before);
    expect(rpcLog.some((r) => r.rpc === 'ReadResource')).toBe(true);
    await opened.client.close();
  });

  it('raises error diagnostics as PROVIDER.DIAGNOSTICS', async () => {
    const opened = await factory().open(AWS, { searchPaths: [mirror], env: {}, lockFile: null });
    clients.push(opened.client);
    const config = {
      ...(providerConfig() as Record<string, CtyJson>),
      region: 'mars-north-9',
      skip_region_validation: false,
    };
    let err: unknown;
    try {
      await opened.client.configure(config);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ProviderDiagnosticsError);
    expect((err as ProviderDiagnosticsError).code).toBe('PROVIDER.DIAGNOSTICS');
    expect((err as ProviderDiagnosticsError).diagnostics.some((d) => d.severity === 'error')).toBe(
      true,
    );
    expect((err as Error).message).toContain('mars-north-9');
    await opened.client.close();
  });

  it('gives up on a call past its deadline with PROVIDER.TIMEOUT', async () => {
    const slow = new CachedSchemaProviderFactory(cache, { callTimeoutMs: 1 });
    const opened = await slow.open(AWS, { searchPaths: [mirror], env: {}, lockFile: null });
    clients.push(opened.client);
    await expect(opened.client.configure(providerConfig())).rejects.toMatchObject({
      code: 'PROVIDER.TIMEOUT',
    });
    await opened.client.close();
    expect(pidAlive(opened.client.pid!)).toBe(false);
  });

  it('lists resource types and schema versions with `provider schema`, from the cache', async () => {
    const program = new Command().exitOverride().option('--format <f>', '', 'json');
    registerProviderSchemaCommand(program, async () => cache);
    const out: string[] = [];
    const write = jest.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      out.push(String(chunk));
      return true;
    });
    try {
      await program.parseAsync(
        ['provider', 'schema', 'hashicorp/aws', '--provider-search-path', mirror],
        { from: 'user' },
      );
    } finally {
      write.mockRestore();
    }
    const rows = JSON.parse(out.join('')) as { type: string; schema_version: number }[];
    expect(rows).toContainEqual({ type: 'aws_ssm_parameter', schema_version: 0 });
    expect(rows).toContainEqual({ type: 'aws_s3_bucket', schema_version: 0 });
    expect(rows).toHaveLength(Object.keys(schema.resourceSchemas).length);
  });

  it('fails `provider schema` for a version that is not installed, naming where it looked', async () => {
    const program = new Command().exitOverride();
    registerProviderSchemaCommand(program, async () => cache);
    const run = program.parseAsync(
      [
        'provider',
        'schema',
        'hashicorp/aws',
        '--version',
        '9.9.9',
        '--provider-search-path',
        mirror,
      ],
      { from: 'user' },
    );
    await expect(run).rejects.toThrow(
      /^provider registry\.terraform\.io\/hashicorp\/aws 9\.9\.9 .* not found; searched /,
    );
    await expect(run).rejects.toThrow(
      path.join(path.resolve(mirror), 'registry.terraform.io', 'hashicorp', 'aws', '9.9.9'),
    );
  });

  it('reports a provider that crashes as PROVIDER.CRASHED with its panic', async () => {
    const opened = await factory().open(AWS, { searchPaths: [mirror], env: {}, lockFile: null });
    clients.push(opened.client);
    // Reading real state before Configure makes SDKv2 dereference a nil client.
    let err: unknown;
    try {
      await refresh(opened.client, 'aws_s3_bucket.b');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ProviderError);
    expect((err as ProviderError).code).toBe('PROVIDER.CRASHED');
    expect((err as ProviderError).message).toMatch(/panic/);
    expect(pidAlive(opened.client.pid!)).toBe(false);
    await expect(
      opened.client.readResource({ typeName: 'aws_s3_bucket', currentState: null }),
    ).rejects.toMatchObject({
      code: 'PROVIDER.CRASHED',
    });
  });

  it('leaves no provider process or socket directory behind', async () => {
    const t0 = performance.now();
    await client.close();
    timings.close = Math.round(performance.now() - t0);
    await Promise.all(clients.map((c) => c.close()));
    expect(clients.length).toBeGreaterThanOrEqual(4);
    for (const c of clients) {
      expect(pidAlive(c.pid!)).toBe(false);
      expect(fs.existsSync(c.socketDir)).toBe(false);
    }
    await expect(client.configure(providerConfig())).rejects.toMatchObject({
      code: 'PROVIDER.CLOSED',
    });
  });
});
