import {
  AcquireOutcome,
  AcquireRequest,
  ApplyServerPort,
  CommitRequest,
  EngineCandidates,
  EngineOffer,
  EngineScope,
  EngineSlice,
  FinishRequest,
  Holder,
  Trunk,
} from '../../application/apply/apply-server.port';
import { DomainError } from '../../domain/shared/domain-error';
import { isJsonObject, JsonObject } from '../../domain/terraform/json-value';
import { stringifyJson } from '../../domain/terraform/lossless-json';
import { parseStateDocument } from '../../domain/terraform/parse-state-document';
import { commitUpserts } from './commit-upserts';
import { errorOf, KldHttpClient, KldResponse, statePath } from './kld-http-client';

function asString(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

function holderOf(raw: unknown): Holder | null {
  if (!isJsonObject(raw) || typeof raw.glob !== 'string') return null;
  const kind = raw.kind === 'terraform-lock' || raw.kind === 'terraform-plan' ? raw.kind : 'apply';
  return {
    glob: raw.glob,
    mode: raw.mode === 'read' ? 'read' : 'write',
    actor: asString(raw.actor),
    runId: asString(raw.run_id),
    lockId: asString(raw.lock_id),
    kind,
    acquiredAt: asString(raw.acquired_at),
    expiresAt: typeof raw.expires_at === 'string' ? raw.expires_at : null,
    ...(isJsonObject(raw.lock_info) ? { lockInfo: raw.lock_info } : {}),
  };
}

/** The `{error:{…}}` body of a refusal, with its extra members (`holders`, `addresses`). */
async function refusal(res: KldResponse): Promise<JsonObject | null> {
  try {
    const body = (await res.json()) as unknown;
    if (isJsonObject(body) && isJsonObject(body.error)) return { ...body, ...body.error };
  } catch {
    // not JSON
  }
  return null;
}

/** `ApplyServerPort` over kld's REST API (docs/api.md, "apply runs"). */
export class RestApplyServer implements ApplyServerPort {
  constructor(private readonly http: KldHttpClient) {}

  private runPath(state: string, runId?: string, action?: string): string {
    let p = `/v1/api/states/${statePath(state)}/apply-runs`;
    if (runId !== undefined) p += `/${encodeURIComponent(runId)}`;
    if (action !== undefined) p += `/${action}`;
    return p;
  }

  /** The state-engine lane's routes (docs/state-engine.md). */
  private enginePath(state: string, tail = ''): string {
    return `/v1/engine/states/${statePath(state)}${tail}`;
  }

  async engineOffer(): Promise<EngineOffer | null> {
    const res = await this.http.send('GET', '/v1/engine');
    // A kld from before the lane (or behind a proxy that hides it) has no such route.
    if (res.status === 404 || res.status === 405) {
      res.discard();
      return null;
    }
    if (!res.ok) throw await errorOf(res);
    const body = (await res.json()) as JsonObject;
    return {
      protocolVersion: typeof body.protocol_version === 'number' ? body.protocol_version : 0,
      operations: Array.isArray(body.operations)
        ? body.operations.filter((o): o is string => typeof o === 'string')
        : [],
    };
  }

  async engineInstanceCount(state: string): Promise<number> {
    const body = await this.http.json<JsonObject>('GET', this.enginePath(state));
    return typeof body.instance_count === 'number' ? body.instance_count : 0;
  }

  private candidates(c: EngineCandidates): JsonObject {
    return {
      ...(c.addresses.length > 0 ? { addresses: c.addresses } : {}),
      ...(c.modulePrefixes.length > 0 ? { module_prefixes: c.modulePrefixes } : {}),
    };
  }

  async expandScope(
    state: string,
    candidates: EngineCandidates,
    options: { withSlice?: boolean } = {},
  ): Promise<EngineScope> {
    const body = await this.http.json<JsonObject>('POST', this.enginePath(state, '/scope'), {
      json: { ...this.candidates(candidates), ...(options.withSlice ? { slice: true } : {}) },
      retry: true,
    });
    const objects = (v: unknown) => (Array.isArray(v) ? v.filter(isJsonObject) : []);
    const strings = (v: unknown) =>
      Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
    const reservations = isJsonObject(body.reservations) ? body.reservations : {};
    return {
      version: typeof body.version === 'number' ? body.version : 0,
      scope: objects(body.scope).map((s) => ({
        address: asString(s.address),
        instances: strings(s.instances),
      })),
      closure: objects(body.closure).map((c) => ({
        address: asString(c.address),
        direction: asString(c.direction),
        via: asString(c.via),
        reason: asString(c.reason),
      })),
      unresolved: objects(body.unresolved).map((u) => ({
        candidate: asString(u.candidate),
        kind: asString(u.kind),
        classification: asString(u.classification),
      })),
      reservations: { write: strings(reservations.write), read: strings(reservations.read) },
      // Only an explicit true proves anything.
      provablySafe: body.provably_safe === true,
      reasons: strings(body.reasons),
      ...(typeof body.instance_count === 'number' ? { instanceCount: body.instance_count } : {}),
      ...(isJsonObject(body.slice) ? { slice: this.sliceIn(body.slice) } : {}),
    };
  }

  /** The slice a scope expansion answered with (`withSlice`). */
  private sliceIn(raw: JsonObject): EngineSlice {
    const version = raw.version;
    if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1) {
      throw new DomainError(
        'SERVER.UNEXPECTED_ANSWER',
        `${this.http.base} sent a scope's slice without its version`,
      );
    }
    return {
      document: parseStateDocument(raw.document),
      version,
      bytes: typeof raw.bytes === 'number' ? raw.bytes : 0,
    };
  }

  async slice(state: string, candidates: EngineCandidates): Promise<EngineSlice> {
    const res = await this.http.send('POST', this.enginePath(state, '/slice'), {
      json: this.candidates(candidates),
      retry: true,
    });
    if (!res.ok) throw await errorOf(res);
    const text = await res.text();
    return {
      document: parseStateDocument(text),
      version: this.versionOf(res),
      bytes: Buffer.byteLength(text),
    };
  }

  private versionOf(res: KldResponse): number {
    const version = Number(res.header('x-kilolock-state-version'));
    if (!Number.isSafeInteger(version) || version < 1) {
      throw new DomainError(
        'SERVER.UNEXPECTED_ANSWER',
        `${this.http.base} sent the state without an X-Kilolock-State-Version header`,
      );
    }
    return version;
  }

  async trunk(state: string): Promise<Trunk> {
    const res = await this.http.send('GET', `/v1/states/${statePath(state)}`);
    if (res.status === 404) {
      res.discard();
      throw new DomainError(
        'STATE.NOT_FOUND',
        `state "${state}" does not exist on ${this.http.base}`,
      );
    }
    if (!res.ok) throw await errorOf(res);
    const text = await res.text();
    if (text.trim() === '') {
      throw new DomainError('STATE.NOT_FOUND', `state "${state}" has no document yet`);
    }
    return { document: parseStateDocument(text), version: this.versionOf(res) };
  }

  async acquire(state: string, request: AcquireRequest): Promise<AcquireOutcome> {
    const run = {
      run_id: request.runId,
      base_version: request.baseVersion,
      write: request.write,
      read: request.read,
      write_set: request.writeSet,
      read_set: request.readSet,
      lease_seconds: request.leaseSeconds,
      info: request.info,
    };
    // The trusted lane starts its run on the engine: terraform then sees a state-engine lock.
    // With its run id, a start sent again answers the same run (docs/api.md).
    const res =
      request.lane === 'state-engine'
        ? await this.http.send('POST', this.enginePath(state, '/runs'), {
            json: { operation: 'apply', ...run },
            retry: true,
          })
        : await this.http.send('POST', this.runPath(state), {
            json: { ...run, lane: 'full' },
            retry: true,
          });
    if (res.ok) {
      const body = (await res.json()) as JsonObject;
      const reservations = Array.isArray(body.reservations) ? body.reservations : [];
      return {
        status: 'acquired',
        runId: asString(body.run_id) || request.runId,
        expiresAt: asString(body.expires_at),
        reservations: reservations.filter(isJsonObject).map((r) => ({
          id: asString(r.id),
          glob: asString(r.glob),
          mode: r.mode === 'read' ? 'read' : 'write',
          expiresAt: asString(r.expires_at),
        })),
      };
    }
    const body = await refusal(res);
    if (res.status === 409 && body?.code === 'RESERVATION.CONFLICT') {
      res.discard();
      const holders = (Array.isArray(body.holders) ? body.holders : [])
        .map(holderOf)
        .filter((h): h is Holder => h !== null);
      return { status: 'conflict', holders };
    }
    if (res.status === 409 && body?.code === 'APPLY.STALE') {
      res.discard();
      const addresses = (Array.isArray(body.addresses) ? body.addresses : [])
        .filter(isJsonObject)
        .map((a) => ({
          address: asString(a.address),
          changedInVersion: typeof a.changed_in_version === 'number' ? a.changed_in_version : 0,
        }));
      return { status: 'stale', addresses };
    }
    throw await errorOf(res);
  }

  async heartbeat(
    state: string,
    runId: string,
    leaseSeconds: number,
  ): Promise<{ expiresAt: string }> {
    const body = await this.http.json<JsonObject>('POST', this.runPath(state, runId, 'heartbeat'), {
      json: { lease_seconds: leaseSeconds },
      retry: true,
    });
    return { expiresAt: asString(body.expires_at) };
  }

  async commit(
    state: string,
    runId: string,
    request: CommitRequest,
  ): Promise<{ version: number; serial: number }> {
    const body = {
      base_version: request.baseVersion,
      terraform_version: request.terraformVersion,
      upserts: commitUpserts(request.upserts),
      deletes: request.deletes,
      outputs: request.outputs,
      counters: request.counters,
    };
    // stringifyJson: numbers beyond double precision go out exactly as terraform wrote them.
    const path =
      request.lane === 'state-engine'
        ? this.enginePath(state, `/runs/${encodeURIComponent(runId)}/commit`)
        : this.runPath(state, runId, 'commit');
    // Sent again only when kld said it took nothing (429, 503 with Retry-After): a commit
    // sent again answers the version it made (docs/api.md), so this is never a second one.
    const res = await this.http.send('POST', path, {
      body: stringifyJson(body),
      contentType: 'application/json',
      retry: true,
    });
    if (!res.ok) throw await errorOf(res);
    const answer = (await res.json()) as JsonObject;
    if (typeof answer.version !== 'number' || typeof answer.serial !== 'number') {
      throw new DomainError(
        'SERVER.UNEXPECTED_ANSWER',
        'the commit answer has no version and serial',
      );
    }
    return { version: answer.version, serial: answer.serial };
  }

  async finish(state: string, runId: string, request: FinishRequest): Promise<void> {
    const head = JSON.stringify({
      status: request.status,
      ...(request.errorSummary === undefined ? {} : { error_summary: request.errorSummary }),
    });
    let text = head;
    if (request.outputState !== undefined && isJsonText(request.outputState)) {
      // The document travels as terraform wrote it, byte for byte.
      text = `${head.slice(0, -1)},"output_state":${request.outputState.trim()}}`;
    }
    // The same status sent again answers 200 (docs/api.md).
    const res = await this.http.send('POST', this.runPath(state, runId, 'finish'), {
      body: text,
      contentType: 'application/json',
      retry: true,
    });
    if (!res.ok) throw await errorOf(res);
    res.discard();
  }
}

function isJsonText(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
