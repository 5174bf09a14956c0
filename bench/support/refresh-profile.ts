import {
  resolveEnvReferences,
  shapeProviderConfig,
} from '../../src/application/refresh/provider-config';
import { groupByProvider } from '../../src/application/refresh/provider-groups';
import { RefreshOrchestrator } from '../../src/application/refresh/refresh-orchestrator';
import { RefreshReport } from '../../src/application/refresh/refresh-report';
import { RefreshServerPort } from '../../src/application/refresh/refresh-server.port';
import { ProviderSchemaCache } from '../../src/application/ports/provider-schema-cache.port';
import { CtyJson } from '../../src/domain/cty/cty-type';
import { ProviderSchema } from '../../src/domain/cty/schema';
import { flattenInstances, parseStateDocument } from '../../src/domain/terraform';
import {
  launchProvider,
  LaunchProviderOptions,
} from '../../src/infrastructure/provider/grpc-provider-client';
import { ProviderClient } from '../../src/infrastructure/provider/provider-client';
import { CachedSchemaProviderFactory } from '../../src/infrastructure/provider/provider-factory';
import { RestProviderSchemaCache } from '../../src/infrastructure/provider/rest-provider-schema-cache';
import { systemRefreshHost } from '../../src/infrastructure/refresh/system-refresh-host';
import { FactoryProviderOpener } from '../../src/infrastructure/refresh/factory-provider-opener';
import { RestRefreshServer } from '../../src/infrastructure/refresh/rest-refresh-server';
import { KldHttpClient } from '../../src/infrastructure/rest/kld-http-client';
import { DatabaseCpuMeter, processCpuMs } from './process-cpu';

/**
 * `kl refresh`'s own pipeline (the objects refresh.command.ts wires up), run
 * in this process with a stopwatch around every server call and every
 * provider RPC, to say where a refresh spends its time. The wall time of the
 * real `kl refresh` child process is measured separately; the difference is
 * kl's start-up (node, module loading).
 */

export interface Span {
  calls: number;
  ms: number;
}

export interface RefreshProfile {
  wallMs: number;
  report: RefreshReport;
  /** Keyed by phase name: server calls, provider RPCs, schema cache. */
  spans: Record<string, Span>;
  /** From the end of Configure to the last ReadResource answer: the read loop, kl's own work included. */
  readLoopMs: number;
  schemaFromCache: boolean;
  /** Bytes of the schema as the cache serves it (JSON), when it came from the cache. */
  schemaJsonBytes: number | null;
  /**
   * CPU (user + system) of the run, ms: kl's side (this process), the provider processes, kld,
   * and PostgreSQL's backends serving kld's database (NaN when the server is not ours to see).
   */
  cpu: { kl: number; providers: number; kld: number; postgres: number };
  /** Provider processes launched (the pool size, once per group). */
  providerProcesses: number;
}

class Stopwatch {
  readonly spans: Record<string, Span> = {};

  async time<T>(name: string, work: () => Promise<T>): Promise<T> {
    const t0 = performance.now();
    try {
      return await work();
    } finally {
      const span = (this.spans[name] ??= { calls: 0, ms: 0 });
      span.calls++;
      span.ms += performance.now() - t0;
    }
  }
}

/** Every method of the port, timed under `server <method>`. */
function timedServer(inner: RefreshServerPort, watch: Stopwatch): RefreshServerPort {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) =>
        watch.time(`server ${String(prop)}`, () =>
          Promise.resolve((value as (...a: unknown[]) => unknown).apply(target, args)),
        );
    },
  });
}

function timedCache(
  inner: ProviderSchemaCache,
  watch: Stopwatch,
  seen: { bytes: number | null },
): ProviderSchemaCache {
  return {
    get: (source, version) =>
      watch.time('schema cache get', async () => {
        const schema = await inner.get(source, version);
        if (schema) seen.bytes = JSON.stringify(schema).length;
        return schema;
      }),
    put: (source: string, version: string, schema: ProviderSchema) =>
      watch.time('schema cache put', () => inner.put(source, version, schema)),
  };
}

export async function profileRefresh(
  kldUrl: string,
  state: string,
  options: {
    cwd: string;
    actor: string;
    env: NodeJS.ProcessEnv;
    kldPid: number;
    /** Provider processes per group (`kl refresh --pool`); the orchestrator's default else. */
    pool?: number;
    /** The embedded postmaster and kld's database on it, to count PostgreSQL's CPU. */
    postgres?: { postmaster: number; database: string };
  },
): Promise<RefreshProfile> {
  const watch = new Stopwatch();
  let providerCpuMs = 0;
  let providerProcesses = 0;
  const http = new KldHttpClient(kldUrl, { actor: options.actor });
  const server = timedServer(new RestRefreshServer(http), watch);
  const seen = { bytes: null as number | null };
  const cache = timedCache(new RestProviderSchemaCache(http), watch, seen);
  let configuredAt = 0;
  let lastReadAt = 0;
  let fromCache = true;

  const launcher = async (
    binary: string,
    launchOptions: LaunchProviderOptions,
  ): Promise<ProviderClient> => {
    const client = await watch.time('provider launch (spawn, handshake, TLS)', () =>
      launchProvider(binary, launchOptions),
    );
    providerProcesses++;
    const wrapped: ProviderClient = {
      get protocolVersion() {
        return client.protocolVersion;
      },
      get pid() {
        return client.pid;
      },
      get socketDir() {
        return client.socketDir;
      },
      get exited() {
        return client.exited;
      },
      getSchema: () => {
        fromCache = false;
        return watch.time('provider GetSchema', () => client.getSchema());
      },
      useSchema: (schema) => client.useSchema(schema),
      configure: async (...args) => {
        const r = await watch.time('provider Configure', () => client.configure(...args));
        configuredAt = performance.now();
        return r;
      },
      upgradeResourceState: (...args) =>
        watch.time('provider UpgradeResourceState', () => client.upgradeResourceState(...args)),
      readResource: async (...args) => {
        const r = await watch.time('provider ReadResource', () => client.readResource(...args));
        lastReadAt = performance.now();
        return r;
      },
      importResourceState: (...args) => client.importResourceState(...args),
      stop: () => watch.time('provider Stop', () => client.stop()),
      close: () => {
        // Read before the process exits: its /proc entry goes with it.
        const cpu = client.pid === undefined ? NaN : processCpuMs(client.pid);
        if (Number.isFinite(cpu)) providerCpuMs += cpu;
        return watch.time('provider close (shutdown, exit)', () => client.close());
      },
    };
    return wrapped;
  };

  // The same environment the `kl refresh` children get: {"env": …} references and the plugin's.
  const env = Object.fromEntries(
    Object.entries(options.env).filter((e): e is [string, string] => e[1] !== undefined),
  );
  const factory = new CachedSchemaProviderFactory(cache, { shutdownGraceMs: 1_000, env }, launcher);
  const orchestrator = new RefreshOrchestrator(server, new FactoryProviderOpener(factory), {
    ...systemRefreshHost(),
    env,
  });
  const previous = process.cwd();
  // Discovery reads ./.terraform and the lock file, as `kl refresh` run from the workspace does.
  process.chdir(options.cwd);
  const t0 = performance.now();
  const klCpu0 = process.cpuUsage();
  const kldCpu0 = processCpuMs(options.kldPid);
  const pg = options.postgres;
  // Backends already open count from their start: take the difference.
  const pgMeter = pg ? new DatabaseCpuMeter(pg.postmaster, pg.database) : null;
  const pgCpu = () => (pgMeter ? pgMeter.totalMs() : NaN);
  const pgCpu0 = pgCpu();
  try {
    const report = await orchestrator.run(
      state,
      {
        dryRun: false,
        failFast: false,
        actor: options.actor,
        providerSearchPaths: [],
        pool: options.pool,
      },
      new AbortController().signal,
    );
    const klCpu = process.cpuUsage(klCpu0);
    return {
      cpu: {
        kl: (klCpu.user + klCpu.system) / 1000,
        providers: providerCpuMs,
        kld: processCpuMs(options.kldPid) - kldCpu0,
        postgres: pgCpu() - pgCpu0,
      },
      providerProcesses,
      wallMs: performance.now() - t0,
      report,
      spans: watch.spans,
      readLoopMs: lastReadAt > configuredAt && configuredAt > 0 ? lastReadAt - configuredAt : 0,
      schemaFromCache: fromCache,
      schemaJsonBytes: seen.bytes,
    };
  } finally {
    pgMeter?.stop();
    process.chdir(previous);
  }
}

export interface ConcurrencyProbe {
  concurrency: number;
  reads: number;
  ms: number;
}

/**
 * What-if, not what kl does: every managed instance of the state read
 * through ONE provider process (launched, configured as kl refresh would),
 * once with one read in flight at a time, as `kl refresh` reads a provider
 * group, and once with `concurrency` in flight, as terraform's -parallelism
 * does against the same process. Nothing is committed.
 */
export async function probeReadConcurrency(
  kldUrl: string,
  state: string,
  options: { cwd: string; env: NodeJS.ProcessEnv; levels: number[] },
): Promise<ConcurrencyProbe[]> {
  const http = new KldHttpClient(kldUrl);
  const server = new RestRefreshServer(http);
  const flat = flattenInstances(parseStateDocument(await server.getState(state)));
  const groups = groupByProvider(flat);
  if (groups.length !== 1)
    throw new Error(`the probe expects one provider group, found ${groups.length}`);
  const [group] = groups;
  const env = Object.fromEntries(
    Object.entries(options.env).filter((e): e is [string, string] => e[1] !== undefined),
  );
  const stored = (await server.getProviderConfig(state, group.source, group.alias)) ?? {};
  const factory = new CachedSchemaProviderFactory(new RestProviderSchemaCache(http), {
    shutdownGraceMs: 1_000,
    env,
  });
  const opened = await factory.open(group.source, { cwd: options.cwd, env });
  try {
    const config = shapeProviderConfig(
      opened.schema.provider.block,
      resolveEnvReferences(stored, env, 'probe'),
      'probe',
    );
    await opened.client.configure(config as CtyJson);
    const out: ConcurrencyProbe[] = [];
    for (const concurrency of options.levels) {
      let next = 0;
      const t0 = performance.now();
      const worker = async (): Promise<void> => {
        while (next < group.instances.length) {
          const { resource, instance } = group.instances[next++];
          const read = await opened.client.readResource({
            typeName: resource.type,
            currentState: instance.attributes as CtyJson,
            private: instance.private ? Buffer.from(instance.private, 'base64') : undefined,
          });
          if (read.newState.value === null) throw new Error(`${resource.type} read as gone`);
        }
      };
      await Promise.all(Array.from({ length: concurrency }, worker));
      out.push({ concurrency, reads: group.instances.length, ms: performance.now() - t0 });
    }
    return out;
  } finally {
    await opened.client.close();
  }
}
