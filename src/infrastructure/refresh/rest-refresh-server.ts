import type { FinishedRun, StartedRun } from '../../application/refresh/refresh-commands';
import {
  FinishRefreshRun,
  LockOutcome,
  RefreshServerPort,
  StartRefreshRun,
} from '../../application/refresh/refresh-server.port';
import { ProviderSchema } from '../../domain/cty/schema';
import type { RefreshResult } from '../../domain/refresh';
import { DomainError } from '../../domain/shared/domain-error';
import { LockInfo, STATE_LOCK_MISMATCH, STATE_NOT_FOUND } from '../../domain/state';
import { isJsonObject, JsonObject, JsonValue, parseJsonExact } from '../../domain/terraform';
import type { ProviderConfigQueryDto, PutProviderConfigDto } from '../http/dto/provider-config.dto';
import type {
  DriftQueryDto,
  FinishRefreshRunDto,
  RefreshResultsDto,
  StartRefreshRunDto,
} from '../http/dto/refresh-run.dto';
import { RestProviderSchemaCache } from '../provider/rest-provider-schema-cache';
import { checkEachFields, checkFields, Fields } from '../rest/answer-fields';
import { errorOf, KldHttpClient, KldResponse, statePath } from '../rest/kld-http-client';

export interface StoredProviderConfig {
  source: string;
  alias: string | null;
  config: JsonObject;
  updated_at: string | null;
  updated_by: string | null;
}

/** One change in `GET /v1/provider-configs/history`. */
export interface ProviderConfigChangeEntry {
  at: string;
  actor: string;
  action: 'configured' | 'removed';
  source: string;
  alias: string | null;
  config: JsonObject | null;
  changed_paths: string[];
}

export interface DriftEntry {
  address: string;
  type: string;
  changed_paths: string[];
  previous_attributes: JsonValue;
  current_attributes: JsonValue;
  detected_serial: number | null;
  detected_version: number | null;
  refresh_run_id: string | null;
}

interface StartedWire {
  run_id: string;
  state_id: string;
  from_version: number;
  from_serial: number;
}

interface FinishedWire {
  run_id: string;
  status: FinishedRun['status'];
  to_version: number | null;
  checked: number;
  changed: number;
  failed: number;
  normalized: number;
  skipped: number;
}

const STARTED_FIELDS: Fields = {
  run_id: 'string',
  state_id: 'string',
  from_version: 'number',
  from_serial: 'number',
};
const FINISHED_FIELDS: Fields = {
  run_id: 'string',
  status: 'string',
  to_version: 'number?',
  checked: 'number',
  changed: 'number',
  failed: 'number',
  normalized: 'number',
  skipped: 'number',
};

/** `RefreshServerPort` over kld's REST API, as `kl refresh` uses it; plus the provider-config and drift reads `kl` shows. */
export class RestRefreshServer implements RefreshServerPort {
  private readonly schemas: RestProviderSchemaCache;

  constructor(private readonly http: KldHttpClient) {
    this.schemas = new RestProviderSchemaCache(http);
  }

  async getState(name: string): Promise<string> {
    const res = await this.http.send('GET', `/v1/states/${statePath(name)}`);
    if (res.status === 404) {
      res.discard();
      throw new DomainError(STATE_NOT_FOUND, `state "${name}" does not exist on ${this.http.base}`);
    }
    if (!res.ok) throw await errorOf(res);
    const text = await res.text();
    if (text.trim() === '') {
      throw new DomainError(STATE_NOT_FOUND, `state "${name}" has no document yet`);
    }
    return text;
  }

  async lock(name: string, info: LockInfo): Promise<LockOutcome> {
    const res = await this.http.send('LOCK', `/v1/states/${statePath(name)}`, { json: info });
    if (res.ok) {
      res.discard();
      return { acquired: true };
    }
    const holder = await holderOf(res);
    if ((res.status === 423 || res.status === 409) && holder) return { acquired: false, holder };
    throw await errorOf(res);
  }

  async unlock(name: string, info: LockInfo): Promise<void> {
    const res = await this.http.send('UNLOCK', `/v1/states/${statePath(name)}`, { json: info });
    if (res.ok) {
      res.discard();
      return;
    }
    const holder = await holderOf(res);
    if (holder) {
      throw new DomainError(
        STATE_LOCK_MISMATCH,
        `lock ${info.ID} is not held: the lock belongs to ${holder.Who || 'someone'} (ID ${holder.ID})`,
      );
    }
    throw await errorOf(res);
  }

  async startRun(request: StartRefreshRun): Promise<StartedRun> {
    const body = await this.http.json<StartedWire>('POST', '/v1/refresh-runs', {
      json: {
        state: request.state,
        dry_run: request.dryRun,
        actor: request.actor,
        lock_id: request.lockId,
      } satisfies StartRefreshRunDto,
    });
    checkFields(body, STARTED_FIELDS, 'POST /v1/refresh-runs');
    return {
      runId: body.run_id,
      stateId: body.state_id,
      fromVersion: body.from_version,
      fromSerial: body.from_serial,
    };
  }

  async recordResults(runId: string, results: RefreshResult[]): Promise<void> {
    // A batch sent again adds nothing (docs/api.md): safe to repeat after a 429.
    await this.http.json<unknown>('POST', `/v1/refresh-runs/${encodeURIComponent(runId)}/results`, {
      retry: true,
      json: {
        results: results.map((r) => ({
          address: r.address,
          provider: r.provider,
          outcome: r.outcome,
          before_hash: r.beforeHash,
          after_hash: r.afterHash,
          changed_paths: r.changedPaths,
          ...(r.error === undefined ? {} : { error: r.error }),
        })),
      } satisfies RefreshResultsDto,
    });
  }

  async finishRun(runId: string, request: FinishRefreshRun): Promise<FinishedRun> {
    const body = await this.http.json<FinishedWire>(
      'POST',
      `/v1/refresh-runs/${encodeURIComponent(runId)}/finish`,
      {
        json: {
          status: request.status,
          error_summary: request.errorSummary,
          document: request.document,
          lock_id: request.lockId,
        } satisfies FinishRefreshRunDto,
      },
    );
    checkFields(body, FINISHED_FIELDS, 'POST /v1/refresh-runs/<run>/finish');
    return {
      runId: body.run_id,
      status: body.status,
      toVersion: body.to_version ?? null,
      checked: body.checked,
      changed: body.changed,
      failed: body.failed,
      normalized: body.normalized,
      skipped: body.skipped,
    };
  }

  async getProviderConfig(
    state: string,
    source: string,
    alias: string | null,
  ): Promise<JsonObject | null> {
    const entry = await this.providerConfig(state, source, alias);
    return entry?.config ?? null;
  }

  /** One stored config with its metadata, or null. */
  async providerConfig(
    state: string,
    source: string,
    alias: string | null,
  ): Promise<StoredProviderConfig | null> {
    const res = await this.http.send('GET', '/v1/provider-configs', {
      query: configQuery(state, source, alias),
    });
    if (res.status === 404) {
      res.discard();
      return null;
    }
    if (!res.ok) throw await errorOf(res);
    return storedConfigOf(parseJsonExact(await res.text()), source, alias);
  }

  async listProviderConfigs(state: string): Promise<StoredProviderConfig[]> {
    const body = await this.http.json<{ configs?: unknown[] }>('GET', '/v1/provider-configs', {
      query: { state } satisfies ProviderConfigQueryDto,
    });
    checkFields(body, { configs: 'list?' }, 'GET /v1/provider-configs');
    return (body?.configs ?? []).map((c) => storedConfigOf(c, '', null));
  }

  /** Stores a config; answers whose config it replaced, if any. */
  async putProviderConfig(
    state: string,
    source: string,
    alias: string | null,
    config: JsonObject,
    options: { checkSchema?: boolean } = {},
  ): Promise<{ replaced: { updated_at: string; updated_by: string } | null }> {
    const body = await this.http.json<{ replaced?: { updated_at: string; updated_by: string } }>(
      'PUT',
      '/v1/provider-configs',
      {
        json: {
          state,
          source,
          ...(alias === null ? {} : { alias }),
          config,
          ...(options.checkSchema === false ? { skip_schema_check: true } : {}),
        } satisfies PutProviderConfigDto,
      },
    );
    return { replaced: body?.replaced ?? null };
  }

  /** Who changed the config of `source` (and `alias`) and when, oldest first. */
  async providerConfigHistory(
    state: string,
    source: string,
    alias: string | null,
  ): Promise<ProviderConfigChangeEntry[]> {
    const body = await this.http.json<{ history?: ProviderConfigChangeEntry[] }>(
      'GET',
      '/v1/provider-configs/history',
      { query: configQuery(state, source, alias) },
    );
    checkFields(body, { history: 'list?' }, 'GET /v1/provider-configs/history');
    const history = body?.history ?? [];
    checkEachFields(
      history,
      { changed_paths: 'strings' },
      'GET /v1/provider-configs/history',
      'history',
    );
    return history;
  }

  async removeProviderConfig(state: string, source: string, alias: string | null): Promise<void> {
    const res = await this.http.send('DELETE', '/v1/provider-configs', {
      query: configQuery(state, source, alias),
    });
    if (!res.ok) throw await errorOf(res);
    res.discard();
  }

  async drift(state: string): Promise<DriftEntry[]> {
    const body = await this.http.json<{ drift?: DriftEntry[] }>('GET', '/v1/drift', {
      query: { state } satisfies DriftQueryDto,
    });
    checkFields(body, { drift: 'list?' }, 'GET /v1/drift');
    return body?.drift ?? [];
  }

  getProviderSchema(source: string, version: string): Promise<ProviderSchema | null> {
    return this.schemas.get(source, version);
  }

  putProviderSchema(source: string, version: string, schema: ProviderSchema): Promise<void> {
    return this.schemas.put(source, version, schema);
  }
}

/** `?state=&source=&alias=`; no alias is the default configuration. */
function configQuery(state: string, source: string, alias: string | null) {
  return { state, source, ...(alias === null ? {} : { alias }) } satisfies ProviderConfigQueryDto;
}

/** The holder's LockInfo, as it sent it, when the body is one (terraform's conflict answer). */
async function holderOf(res: KldResponse): Promise<LockInfo | null> {
  try {
    const body: unknown = parseJsonExact(await res.text());
    return isJsonObject(body) && typeof body.ID === 'string' ? (body as LockInfo) : null;
  } catch {
    return null;
  }
}

/** Accepts both `{source, alias, config, …}` and a bare `{config}`. */
function storedConfigOf(raw: unknown, source: string, alias: string | null): StoredProviderConfig {
  const body = isJsonObject(raw) ? raw : {};
  const config = isJsonObject(body.config) ? body.config : {};
  const text = (v: unknown): string | null => (typeof v === 'string' ? v : null);
  return {
    source: text(body.source) ?? source,
    alias: body.alias === undefined ? alias : text(body.alias),
    config,
    updated_at: text(body.updated_at),
    updated_by: text(body.updated_by),
  };
}
