import * as os from 'node:os';
import { KlError } from './cli-error';

export interface QueryRequest {
  sql: string;
  params?: unknown[];
  max_rows?: number;
  timeout_ms?: number;
}

export interface QueryResponse {
  columns: { name: string; type: string }[];
  rows: unknown[][];
  truncated: boolean;
}

export interface StateSummary {
  name: string;
  version: number;
  serial: number | null;
  lineage: string | null;
  terraformVersion: string | null;
  instanceCount: number;
  resourceCount: number;
  updatedAt: string;
  lock: { id: string; who: string | null; operation: string | null; since: string } | null;
}

export interface VersionSummary {
  version: number;
  serial: number;
  source: string;
  actor: string;
  terraformVersion: string;
  instanceCount: number;
  resourceCount: number;
  createdAt: string;
}

export interface ResourceSummary {
  address: string;
  type: string;
  module: string;
  provider: string;
  status: string | null;
  sinceVersion: number;
  sinceSerial: number;
}

export interface ResourceDetail extends ResourceSummary {
  attributes: Record<string, unknown> | null;
  dependencies: string[] | null;
}

export interface ResourceLifecycle {
  createVersion: number;
  createSerial: number;
  deleteVersion: number | null;
  deleteSerial: number | null;
  attributesHash: string;
  attributes: unknown;
}

export interface StateDiff {
  from: { version: number; serial: number };
  to: { version: number; serial: number };
  added: string[];
  removed: string[];
  changed: { address: string; attributes: string[]; members: string[] }[];
}

export interface LockSummary {
  name: string;
  lockId: string;
  operation: string | null;
  who: string | null;
  acquiredAt: string;
  acquiredBy: string;
}

interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: string | Buffer | ReadableStream<Uint8Array>;
  contentType?: string;
}

/** kld's REST API as `kl` uses it. Every failure is a KlError with a readable message. */
export class KilolockClient {
  private readonly base: string;

  constructor(
    server: string,
    private readonly token?: string,
  ) {
    this.base = server.replace(/\/+$/, '');
  }

  query(request: QueryRequest): Promise<QueryResponse> {
    return this.json('POST', '/v1/query', {
      body: JSON.stringify(request),
      contentType: 'application/json',
    });
  }

  async states(): Promise<StateSummary[]> {
    return (await this.json<{ states: StateSummary[] }>('GET', '/v1/api/states')).states;
  }

  async history(state: string): Promise<VersionSummary[]> {
    const path = `/v1/api/states/${statePath(state)}/history`;
    return (await this.json<{ versions: VersionSummary[] }>('GET', path)).versions;
  }

  async resources(state: string, addressGlob?: string): Promise<ResourceSummary[]> {
    const path = `/v1/api/states/${statePath(state)}/resources`;
    const query = { address_glob: addressGlob };
    return (await this.json<{ resources: ResourceSummary[] }>('GET', path, { query })).resources;
  }

  resource(
    state: string,
    address: string,
    history: boolean,
  ): Promise<{ current: ResourceDetail | null; history?: ResourceLifecycle[] }> {
    // One segment: instance keys may contain slashes.
    const path = `/v1/api/states/${statePath(state)}/resources/${encodeURIComponent(address)}`;
    return this.json('GET', path, { query: { history: history || undefined } });
  }

  diff(state: string, from: number, to?: number): Promise<StateDiff> {
    return this.json('GET', `/v1/api/states/${statePath(state)}/diff`, { query: { from, to } });
  }

  async locks(): Promise<LockSummary[]> {
    return (await this.json<{ locks: LockSummary[] }>('GET', '/v1/api/locks')).locks;
  }

  /** The document exactly as terraform's GET serves it; null when there is none. */
  async exportState(state: string, serial?: number): Promise<string | null> {
    const res = await this.send('GET', `/v1/states/${statePath(state)}`, { query: { serial } });
    if (res.status === 404) return null;
    await this.check(res);
    return res.text();
  }

  async importState(
    state: string,
    body: Buffer | ReadableStream<Uint8Array>,
  ): Promise<{ version: number | null }> {
    return this.json('POST', `/v1/api/states/${statePath(state)}/import`, {
      body,
      contentType: 'application/json',
    });
  }

  /** What `terraform force-unlock` sends: UNLOCK with an empty body. */
  async forceUnlock(state: string): Promise<void> {
    await this.check(await this.send('UNLOCK', `/v1/states/${statePath(state)}`, { body: '' }));
  }

  async rebuildProjections(): Promise<{ projector: string; events: number }[]> {
    const path = '/v1/admin/projections/rebuild';
    return (await this.json<{ projectors: { projector: string; events: number }[] }>('POST', path))
      .projectors;
  }

  private async json<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const res = await this.check(await this.send(method, path, options));
    return (await res.json()) as T;
  }

  private async send(method: string, path: string, options: RequestOptions): Promise<Response> {
    const url = new URL(this.base + path);
    for (const [k, v] of Object.entries(options.query ?? {})) {
      if (v !== undefined) url.searchParams.set(k, String(v));
    }
    const headers: Record<string, string> = { 'X-Kilolock-Actor': actor() };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (options.contentType) headers['Content-Type'] = options.contentType;
    const init: RequestInit & { duplex?: 'half' } = { method, headers, body: options.body };
    if (options.body instanceof ReadableStream) init.duplex = 'half';
    try {
      return await fetch(url, init);
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const why = cause?.code ?? cause?.message ?? (err as Error).message;
      throw new KlError(`cannot reach kld at ${this.base} (${why}); set --server or KL_SERVER_URL`);
    }
  }

  /** Non-2xx → the server's own message when it sent our JSON error body. */
  private async check(res: Response): Promise<Response> {
    if (res.ok) return res;
    const text = await res.text().catch(() => '');
    let message = `${res.status} ${res.statusText}`.trim();
    try {
      const body = JSON.parse(text) as { error?: { message?: string }; ID?: string; Who?: string };
      if (body.error?.message) message = body.error.message;
      else if (body.ID) message = `locked by ${body.Who ?? 'someone'} (lock ${body.ID})`;
    } catch {
      if (text.trim()) message += `: ${text.trim().split('\n')[0].slice(0, 200)}`;
    }
    throw new KlError(message);
  }
}

function statePath(state: string): string {
  return state.split('/').map(encodeURIComponent).join('/');
}

function actor(): string {
  if (process.env.KL_ACTOR) return process.env.KL_ACTOR;
  try {
    return `${os.userInfo().username}@${os.hostname()}`;
  } catch {
    return 'kl';
  }
}
