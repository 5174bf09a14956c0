import type { EventSourceMessage } from 'eventsource-parser';
import { constants as bufferConstants } from 'node:buffer';
import { DomainError } from '../domain/shared/domain-error';
import type { QueryDto } from '../infrastructure/http/dto/query.dto';
import type {
  ForceUnlockDto,
  ImportQueryDto,
  StatesApiQueryDto,
} from '../infrastructure/http/dto/states-api.dto';
import { STATE_VERSION_HEADER } from '../infrastructure/http/headers';
import type { StateSummary } from '../infrastructure/read-models/state-catalog-read-model';
import type { VersionSelector } from '../infrastructure/read-models/state-document-read-model';
import type { ApplyRunSummary, ReservationRow } from '../domain/wire/runs';
import type {
  LockSummary,
  ResourceDetail,
  ResourceLifecycle,
  ResourceSummary,
  StateDiff,
  StateHistory,
} from '../domain/wire/states';

import type { TokenSummary } from '../infrastructure/auth/token-read-model';
import type { SetQuotaDto } from '../infrastructure/http/dto/quota.dto';
import type { QuotaCheckWire } from '../infrastructure/http/quotas.controller';
import type { QuotaRuleRow, QuotaUsage } from '../infrastructure/read-models/quota-read-model';
import type { CreatedTokenWire } from '../infrastructure/http/tokens.controller';
import type { StateDocumentV4 } from '../domain/terraform';
import { parseJsonExact } from '../domain/terraform/lossless-json';
import {
  errorOf,
  KldHttpClient,
  KldRequest,
  KldResponse,
  statePath,
} from '../infrastructure/rest/kld-http-client';
import { redactUrls } from '../infrastructure/logging/redact';
import { checkEachFields, checkFields, Fields } from '../infrastructure/rest/answer-fields';

/** The body of `POST /v1/query`: the server's own DTO. */
export type QueryRequest = QueryDto;

/** What `GET /v1/events` takes (docs/api.md). */
export interface EventsQuery {
  from?: string;
  state?: string[];
  type?: string[];
  stream?: string[];
  follow?: boolean;
  limit?: number;
}

export interface QueryResponse {
  columns: { name: string; type: string }[];
  rows: unknown[][];
  truncated: boolean;
}

// The wire shapes (src/domain/wire, shared with the dashboard), serialised as JSON.
export type { StateSummary } from '../infrastructure/read-models/state-catalog-read-model';
export type { VersionSelector } from '../infrastructure/read-models/state-document-read-model';
export type {
  LockSummary,
  ResourceDetail,
  ResourceLifecycle,
  ResourceSummary,
  StateDiff,
  StateHistory,
  StateVersionSummary as VersionSummary,
} from '../domain/wire/states';
export type { ApplyRunSummary, ReservationRow } from '../domain/wire/runs';

export interface EngineCandidates {
  addresses?: string[];
  module_prefixes?: string[];
  selectors?: { type: string; module?: string }[];
}

export interface EngineState {
  state: string;
  lineage: string;
  serial: number;
  version: number;
  instance_count: number;
  resource_count: number;
  protocol_version: number;
  operations: string[];
}

export interface EngineScope {
  version: number;
  scope: { address: string; instances: string[]; matched_by: string[] }[];
  closure: { address: string; direction: string; via: string; reason: string }[];
  unresolved: { candidate: string; kind: string; classification: string }[];
  reservations: { write: string[]; read: string[] };
  provably_safe: boolean;
  reasons: string[];
}

/** What `kl apply abort` got back. */
export interface AbortedRun {
  run_id: string;
  state: string;
  status: string | null;
  released: number;
}

/**
 * The most one event of `kl events` may hold before its end arrives. kld
 * writes each event as one JavaScript string (events.controller.ts), and an
 * event can carry a whole state document (ApplyFinished's outputState, up to
 * KL_MAX_STATE_BYTES, 512 MiB at most): so no event of kld is longer, and kl
 * could not hold a longer one either. A line that never ends stops here
 * instead of growing until kl runs out of memory.
 */
export const MAX_EVENT_CHARS = bufferConstants.MAX_STRING_LENGTH;

/** kld's REST API as `kl` uses it. Every failure is an error with a one-line message. */
export class KilolockClient {
  private readonly http: KldHttpClient;

  constructor(server: string, token?: string) {
    this.http = new KldHttpClient(server, { token });
  }

  async query(request: QueryRequest): Promise<QueryResponse> {
    // Read-only: safe to send again after a 429.
    const body = await this.json<QueryResponse | null>('POST', '/v1/query', {
      json: request,
      retry: true,
    });
    const rows: unknown = body?.rows;
    if (!Array.isArray(rows) || !rows.every(Array.isArray)) {
      throw new DomainError('SERVER.UNEXPECTED_ANSWER', `kld's answer to /v1/query has no rows`);
    }
    const columns = listIn<QueryResponse['columns'][number]>(body, 'columns', '/v1/query');
    checkEachFields(columns, { name: 'string' }, 'POST /v1/query', 'columns');
    return {
      columns,
      rows: rows as unknown[][],
      truncated: body?.truncated === true,
    };
  }

  async states(): Promise<StateSummary[]> {
    return this.list<StateSummary>('GET', '/v1/api/states', 'states');
  }

  /** The live state's versions, or those of the state deleted last under that name. */
  async history(state: string): Promise<StateHistory> {
    const path = `/v1/api/states/${statePath(state)}/history`;
    const body = await this.json<StateHistory>('GET', path);
    const versions = listIn<StateHistory['versions'][number]>(body, 'versions', path);
    checkFields(body, { deletedAt: 'string?' }, `GET ${path}`);
    return { ...body, deletedAt: body.deletedAt ?? null, versions };
  }

  async resources(
    state: string,
    addressGlob?: string,
    version?: number,
  ): Promise<ResourceSummary[]> {
    const path = `/v1/api/states/${statePath(state)}/resources`;
    const query = { address_glob: addressGlob, version } satisfies StatesApiQueryDto;
    return this.list<ResourceSummary>('GET', path, 'resources', { query });
  }

  async resource(
    state: string,
    address: string,
    history: boolean,
    version?: number,
  ): Promise<{ current: ResourceDetail | null; history?: ResourceLifecycle[] }> {
    // One segment: instance keys may contain slashes.
    const path = `/v1/api/states/${statePath(state)}/resources/${encodeURIComponent(address)}`;
    const answer = await this.json<{
      current: ResourceDetail | null;
      history?: ResourceLifecycle[];
    }>('GET', path, {
      query: { history: history || undefined, version } satisfies StatesApiQueryDto,
    });
    const request = `GET ${path}`;
    checkFields(answer, { current: 'object?', history: 'list?' }, request);
    if (answer.current) checkFields(answer.current, { attributes: 'object?' }, request, 'current');
    const lifecycles: unknown[] = answer.history ?? [];
    checkEachFields(lifecycles, { attributesHash: 'string' }, request, 'history');
    return answer;
  }

  async diff(state: string, from: VersionSelector, to?: VersionSelector): Promise<StateDiff> {
    const path = `/v1/api/states/${statePath(state)}/diff`;
    const diff = await this.json<StateDiff>('GET', path, {
      query: {
        ...selectorQuery('from', from),
        ...(to ? selectorQuery('to', to) : {}),
      } satisfies StatesApiQueryDto,
    });
    checkFields(diff, { added: 'strings', removed: 'strings', changed: 'list' }, `GET ${path}`);
    const fields: Fields = { address: 'string', attributes: 'strings', members: 'strings' };
    checkEachFields(diff.changed, fields, `GET ${path}`, 'changed');
    return diff;
  }

  /** Reservations held now: of one state, or of every state. */
  async reservations(state?: string): Promise<ReservationRow[]> {
    const path =
      state === undefined
        ? '/v1/api/reservations'
        : `/v1/api/states/${statePath(state)}/reservations`;
    return this.list<ReservationRow>('GET', path, 'reservations');
  }

  /** Apply runs, newest first: of one state, or of every state. */
  async runs(state?: string): Promise<ApplyRunSummary[]> {
    const query = state === undefined ? '' : `?state=${encodeURIComponent(state)}`;
    const path = `/v1/api/apply-runs${query}`;
    const runs = await this.list<ApplyRunSummary>('GET', path, 'runs');
    // Read in every row: a run without its globs is another kld's answer.
    const globs: Fields = { count: 'number', first: 'strings' };
    runs.forEach((run, i) => {
      checkFields(run, { write: 'object', read: 'object' }, `GET ${path}`, `runs[${i}]`);
      checkFields(run.write, globs, `GET ${path}`, `runs[${i}].write`);
      checkFields(run.read, globs, `GET ${path}`, `runs[${i}].read`);
    });
    return runs;
  }

  /** Ends a dead run: its reservations are released. Without a state, kld looks it up. */
  abortRun(runId: string, state?: string): Promise<AbortedRun> {
    const run = encodeURIComponent(runId);
    const path =
      state === undefined
        ? `/v1/api/apply-runs/${run}/abort`
        : `/v1/api/states/${statePath(state)}/apply-runs/${run}/abort`;
    // A run that already ended keeps its status: again is no change.
    return this.json('POST', path, { body: '{}', contentType: 'application/json', retry: true });
  }

  async locks(): Promise<LockSummary[]> {
    return this.list<LockSummary>('GET', '/v1/api/locks', 'locks');
  }

  /**
   * The document exactly as terraform's GET serves it (current, or version N),
   * and its version (`versionRequired`: an answer without one is refused).
   */
  async exportState(
    state: string,
    version?: number,
    versionRequired = false,
  ): Promise<{ bytes: Buffer; version: number | null }> {
    const path = `/v1/states/${statePath(state)}`;
    const res = await this.check(await this.send('GET', path, { query: { version } }));
    const served = versionRequired ? versionOf(res, `GET ${path}`) : versionIn(res);
    return { bytes: await res.buffer(), version: served };
  }

  /** Without `force`, kld refuses another lineage or an older serial than the current version. */
  async importState(
    state: string,
    body: Buffer | AsyncIterable<Uint8Array>,
    force: boolean,
  ): Promise<{ version: number | null }> {
    return this.json('POST', `/v1/api/states/${statePath(state)}/import`, {
      body,
      contentType: 'application/json',
      query: { force: force || undefined } satisfies ImportQueryDto,
    });
  }

  /** Releases the lock; with `lockId`, only that lock (STATE.LOCK_MISMATCH if another holds it). */
  forceUnlock(state: string, lockId?: string): Promise<{ released: string | null }> {
    return this.json('POST', `/v1/api/states/${statePath(state)}/force-unlock`, {
      json: (lockId === undefined ? {} : { lock_id: lockId }) satisfies ForceUnlockDto,
    });
  }

  /**
   * The event log as kld streams it (Server-Sent Events), message by message;
   * ends when kld ends the stream (`follow: false` at the head) or `signal` aborts.
   */
  async *events(
    query: EventsQuery,
    signal?: AbortSignal,
    maxEventChars = MAX_EVENT_CHARS,
  ): AsyncGenerator<EventSourceMessage> {
    const list = (values?: string[]) => (values?.length ? values.join(',') : undefined);
    // kld's keep-alives (every 15 s unless asked) must come well within kl's idle bound.
    const idle = this.http.idleMs;
    const heartbeat = idle > 0 && idle < 45_000 ? Math.max(1, Math.floor(idle / 3000)) : undefined;
    const res = await this.check(
      await this.send('GET', '/v1/events', {
        query: {
          from: query.from,
          state: list(query.state),
          type: list(query.type),
          stream: list(query.stream),
          follow: query.follow,
          limit: query.limit,
          heartbeat,
        },
        signal,
        endless: query.follow === true,
      }),
    );
    // Loaded by the commands that need them, not by every kl start-up.
    const { createParser } = await import('eventsource-parser');
    const ready: EventSourceMessage[] = [];
    let tooLong = false;
    const parser = createParser({
      onEvent: (message) => ready.push(message),
      onError: (err) => (tooLong ||= err.type === 'max-buffer-size-exceeded'),
      maxBufferSize: maxEventChars,
    });
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body) {
        parser.feed(decoder.decode(chunk, { stream: true }));
        yield* ready.splice(0);
        if (tooLong) {
          res.body.destroy();
          throw new DomainError(
            'SERVER.UNEXPECTED_ANSWER',
            redactUrls(
              `an event from kld at ${this.http.base} runs past ${maxEventChars} characters without its end (no event kld sends is that long)`,
            ),
          );
        }
      }
    } catch (err) {
      if (err instanceof DomainError) throw err;
      if (signal?.aborted) return;
      throw new DomainError(
        'SERVER.UNREACHABLE',
        `the event stream broke off: ${(err as Error).message}`,
      );
    }
  }

  /** The state's whole history as an archive (NDJSON), streamed. */
  async exportArchive(state: string): Promise<NodeJS.ReadableStream> {
    const res = await this.check(await this.send('GET', `/v1/archives/${statePath(state)}`, {}));
    return res.body;
  }

  /** Recreates an archived history under its own name or `name`; refused if that name has one. */
  importArchive(
    body: Buffer,
    name?: string,
  ): Promise<{ state: string; events: number; versions: number }> {
    return this.json('POST', '/v1/archives', {
      body,
      contentType: 'application/x-ndjson',
      query: { name },
    });
  }

  /** The state-engine lane's view of a state (docs/state-engine.md). */
  engineState(state: string): Promise<EngineState> {
    return this.json('GET', `/v1/engine/states/${statePath(state)}`);
  }

  /** A slice document (numbers exact) and the version it was read at. */
  async engineSlice(
    state: string,
    candidates: EngineCandidates & { version?: number },
  ): Promise<{ document: StateDocumentV4; version: number }> {
    const path = `/v1/engine/states/${statePath(state)}/slice`;
    const res = await this.check(await this.send('POST', path, { json: candidates, retry: true }));
    const version = versionOf(res, `POST ${path}`);
    const { parseStateDocument } = await import('../domain/terraform/parse-state-document');
    const document = parseStateDocument(parseJsonExact(await res.text()));
    return { document, version };
  }

  /** With a run id of kl's own: a start sent again (after a 429) answers the same run. */
  async engineStartRun(
    state: string,
    run: {
      operation: string;
      base_version: number;
      write: string[];
      read?: string[];
      info?: object;
    },
  ): Promise<{ run_id: string; reservations: { glob: string; mode: string }[] }> {
    // Loaded here: no other command of kl needs node:crypto.
    const { randomUUID } = await import('node:crypto');
    return this.json('POST', `/v1/engine/states/${statePath(state)}/runs`, {
      json: { run_id: randomUUID(), ...run },
      retry: true,
    });
  }

  engineCommit(
    state: string,
    runId: string,
    change: object,
  ): Promise<{ version: number; serial: number }> {
    // A commit sent again answers the version it made (docs/api.md).
    return this.json('POST', `/v1/engine/states/${statePath(state)}/runs/${runId}/commit`, {
      json: change,
      retry: true,
    });
  }

  engineFinish(
    state: string,
    runId: string,
    status: 'failed' | 'aborted' | 'conflict',
    summary: string,
  ) {
    return this.json('POST', `/v1/engine/states/${statePath(state)}/runs/${runId}/finish`, {
      json: { status, error_summary: summary },
      retry: true,
    });
  }

  async serverVersion(): Promise<{ version: string }> {
    const answer = await this.json<{ version: string }>('GET', '/v1/version');
    checkFields(answer, { version: 'string' }, 'GET /v1/version');
    return answer;
  }

  async rebuildProjections(): Promise<{ projector: string; events: number }[]> {
    const path = '/v1/admin/projections/rebuild';
    return this.list<{ projector: string; events: number }>('POST', path, 'projectors');
  }

  async createToken(request: {
    name: string;
    scopes: string[];
    expires_at?: string;
    cert_subject?: string;
  }): Promise<CreatedTokenWire> {
    const created = await this.json<CreatedTokenWire>('POST', '/v1/admin/tokens', {
      json: request,
    });
    checkFields(created, { name: 'string', scopes: 'strings' }, 'POST /v1/admin/tokens');
    return created;
  }

  async tokens(all: boolean): Promise<TokenSummary[]> {
    const query = { all: all ? 'true' : undefined };
    return this.list<TokenSummary>(
      'GET',
      '/v1/admin/tokens',
      'tokens',
      { query },
      {
        scopes: 'strings',
      },
    );
  }

  async revokeToken(name: string): Promise<void> {
    await this.json('DELETE', `/v1/admin/tokens/${encodeURIComponent(name)}`);
  }

  setQuota(request: SetQuotaDto): Promise<SetQuotaDto & { changed: boolean }> {
    return this.json('POST', '/v1/quotas', { json: request });
  }

  async removeQuota(glob: string): Promise<void> {
    await this.json('DELETE', '/v1/quotas', { query: { glob } });
  }

  async quotaRules(): Promise<QuotaRuleRow[]> {
    return this.list<QuotaRuleRow>('GET', '/v1/quotas/rules', 'quotas');
  }

  async quotaUsage(state?: string): Promise<QuotaUsage[]> {
    return this.list<QuotaUsage>(
      'GET',
      '/v1/quotas',
      'usage',
      { query: { state } },
      {
        last_overrun: 'object?',
      },
    );
  }

  async quotaCheck(state: string, creates: number, deletes: number): Promise<QuotaCheckWire> {
    const answer = await this.json<QuotaCheckWire>('GET', '/v1/quotas/check', {
      query: { state, creates: String(creates), deletes: String(deletes) },
    });
    checkFields(answer, { over: 'string?', message: 'string' }, 'GET /v1/quotas/check');
    return answer;
  }

  private json<T>(method: string, path: string, request: KldRequest = {}): Promise<T> {
    return this.http.json(method, path, request);
  }

  private async list<T>(
    method: string,
    path: string,
    key: string,
    request: KldRequest = {},
    fields?: Fields,
  ): Promise<T[]> {
    const list = listIn<T>(await this.json<unknown>(method, path, request), key, path);
    if (fields) checkEachFields(list, fields, `${method} ${path}`, key);
    return list;
  }

  private send(method: string, path: string, request: KldRequest): Promise<KldResponse> {
    return this.http.send(method, path, request);
  }

  private async check(res: KldResponse): Promise<KldResponse> {
    if (!res.ok) throw await errorOf(res);
    return res;
  }
}

/**
 * The list `key` of an answer, each item an object: an answer of another
 * shape (not kld, another version, a proxy) is one readable line here rather
 * than a TypeError wherever a field is read.
 */
function listIn<T>(body: unknown, key: string, path: string): T[] {
  const list =
    typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[key] : undefined;
  if (
    !Array.isArray(list) ||
    !list.every((item) => typeof item === 'object' && item !== null && !Array.isArray(item))
  ) {
    throw new DomainError(
      'SERVER.UNEXPECTED_ANSWER',
      `kld's answer to ${path.split('?')[0]} has no list of objects "${key}" (is --server a kld of this version?)`,
    );
  }
  return list as T[];
}

/** The version kld names in its header: the base of what kl writes next, so never guessed. */
function versionOf(res: KldResponse, request: string): number {
  const version = versionIn(res);
  if (version !== null) return version;
  res.discard();
  throw new DomainError(
    'SERVER.UNEXPECTED_ANSWER',
    `kld's answer to ${request} has no version in ${STATE_VERSION_HEADER} (is --server a kld of this version?)`,
  );
}

function versionIn(res: KldResponse): number | null {
  const text = res.header(STATE_VERSION_HEADER) ?? '';
  const version = Number(text);
  return /^\d+$/.test(text) && Number.isSafeInteger(version) ? version : null;
}

type SelectorQuery = Pick<StatesApiQueryDto, 'from' | 'to' | 'from_version' | 'to_version'>;

function selectorQuery(side: 'from' | 'to', at: VersionSelector): SelectorQuery {
  return 'version' in at ? { [`${side}_version`]: at.version } : { [side]: at.serial };
}
