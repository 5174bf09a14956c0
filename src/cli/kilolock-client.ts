import type {
  StateSummary,
  StateVersionSummary as VersionSummary,
} from '../infrastructure/read-models/state-read-model';
import type {
  LockSummary,
  ResourceDetail,
  ResourceLifecycle,
  ResourceSummary,
  StateDiff,
} from '../infrastructure/read-models/resource-read-model';

import {
  errorOf,
  KldHttpClient,
  KldRequest,
  statePath,
} from '../infrastructure/rest/kld-http-client';

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

// The wire shapes are the server's read-model types, serialised as JSON.
export type {
  StateSummary,
  StateVersionSummary as VersionSummary,
} from '../infrastructure/read-models/state-read-model';
export type {
  LockSummary,
  ResourceDetail,
  ResourceLifecycle,
  ResourceSummary,
  StateDiff,
} from '../infrastructure/read-models/resource-read-model';
/** kld's REST API as `kl` uses it. Every failure is an error with a one-line message. */
export class KilolockClient {
  private readonly http: KldHttpClient;

  constructor(server: string, token?: string) {
    this.http = new KldHttpClient(server, { token });
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

  private async json<T>(method: string, path: string, request: KldRequest = {}): Promise<T> {
    return this.http.json<T>(method, path, request);
  }

  private send(method: string, path: string, request: KldRequest): Promise<Response> {
    return this.http.send(method, path, request);
  }

  private async check(res: Response): Promise<Response> {
    if (!res.ok) throw await errorOf(res);
    return res;
  }
}
