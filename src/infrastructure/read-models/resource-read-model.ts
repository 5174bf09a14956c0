import { DomainError } from '../../domain/shared/domain-error';
import { changedPaths } from '../../domain/terraform/changed-paths';
import type { JsonObject, JsonValue } from '../../domain/terraform';
import type { Database } from '../postgres/database';
import type { VersionSelector } from './state-document-read-model';
import { lifecyclesOfListedVersions, type VersionProjections } from './version-lifecycles';
import type {
  LockSummary,
  ResourceDetail,
  ResourceLifecycle,
  ResourceSummary,
  StateDiff,
} from '../../domain/wire/states';

interface SummaryRow {
  address: string;
  resource_address: string;
  mode: string;
  type: string;
  name: string;
  module_path: string;
  index_key: string | null;
  deposed_key: string | null;
  provider: string;
  status: string | null;
  create_version: number;
  create_serial: string;
}

const SUMMARY_COLUMNS = `r.address, r.resource_address, r.mode, r.type, r.name, r.module_path,
  r.index_key, r.deposed_key, r.provider, r.status, r.create_version, r.create_serial`;

/** The per-resource queries behind `kl resources`, `kl resource`, `kl diff` and `kl locks`. */
export class ResourceReadModel {
  /**
   * `projections`: a version named here (by number, serial, or as the
   * current one) is read from lifecycles only once they hold its commit
   * (lifecyclesOfListedVersions); without, a read while another caller's
   * commit is being projected showed the version before it under its number.
   */
  constructor(
    private readonly db: Database,
    private readonly projections?: VersionProjections,
  ) {}

  /**
   * Instances of a live state alive now, or at `version`, optionally filtered
   * by a glob (`*` any run, `?` one character).
   */
  async resources(
    state: string,
    addressGlob?: string,
    version?: number,
  ): Promise<ResourceSummary[]> {
    const stateId = await this.stateId(state);
    if (version !== undefined) await this.versionExists(state, stateId, version);
    const rows = await this.db.query<SummaryRow>(
      `SELECT ${SUMMARY_COLUMNS} FROM resources r
        WHERE r.state_id = $1 AND ${version === undefined ? 'r.delete_version IS NULL' : ALIVE_AT_3}
          AND ($2::text IS NULL OR r.address LIKE $2 ESCAPE '\\')
        ORDER BY r.address`,
      [
        stateId,
        addressGlob ? globToLike(addressGlob) : null,
        ...(version === undefined ? [] : [version]),
      ],
    );
    return rows.map(summary);
  }

  /**
   * One instance as it is now (or as it was at `version`, in `current`);
   * with `history`, every lifecycle it has had, oldest first.
   */
  async resource(
    state: string,
    address: string,
    history: boolean,
    version?: number,
  ): Promise<{ current: ResourceDetail | null; history?: ResourceLifecycle[] }> {
    const stateId = await this.stateId(state);
    if (version !== undefined) await this.versionExists(state, stateId, version);
    const rows = await this.db.query<
      SummaryRow & {
        schema_version: number;
        attributes: JsonValue | null;
        sensitive_attributes: JsonValue | null;
        dependencies: JsonValue | null;
        instance: JsonObject;
        attributes_hash: string;
        delete_version: number | null;
        delete_serial: string | null;
      }
    >(
      `SELECT ${SUMMARY_COLUMNS}, r.schema_version, r.attributes, r.sensitive_attributes,
              r.dependencies, r.instance, r.attributes_hash, r.delete_version, r.delete_serial
         FROM resources r
        WHERE r.state_id = $1 AND r.address = $2
        ORDER BY r.create_version`,
      [stateId, address],
    );
    if (rows.length === 0) {
      throw new DomainError('RESOURCE.NOT_FOUND', `state "${state}" has no resource ${address}`);
    }
    const alive = rows.find((r) =>
      version === undefined
        ? r.delete_version === null
        : r.create_version <= version && (r.delete_version === null || r.delete_version > version),
    );
    const current: ResourceDetail | null = alive
      ? {
          ...summary(alive),
          schemaVersion: alive.schema_version,
          attributes: alive.attributes,
          sensitiveAttributes: alive.sensitive_attributes,
          dependencies: alive.dependencies,
          instance: alive.instance,
        }
      : null;
    if (!history) {
      if (!current) {
        throw new DomainError(
          'RESOURCE.NOT_FOUND',
          version === undefined
            ? `state "${state}" no longer has ${address} (ask for its history)`
            : `state "${state}" had no ${address} at version ${version} (ask for its history)`,
        );
      }
      return { current };
    }
    return {
      current,
      history: rows.map((r) => ({
        createVersion: r.create_version,
        createSerial: Number(r.create_serial),
        deleteVersion: r.delete_version,
        deleteSerial: r.delete_serial === null ? null : Number(r.delete_serial),
        attributesHash: r.attributes_hash,
        attributes: r.attributes,
        dependencies: r.dependencies,
      })),
    };
  }

  /**
   * What changed between two versions, each given by our version number or
   * as the newest version with a terraform serial; `to` defaults to current.
   */
  async diff(
    state: string,
    fromAt: VersionSelector,
    toAt: VersionSelector | null,
  ): Promise<StateDiff> {
    const stateId = await this.stateId(state);
    const from = await this.select(state, stateId, fromAt);
    const to =
      toAt === null
        ? await this.currentVersion(state, stateId)
        : await this.select(state, stateId, toAt);
    const alive = (version: number) =>
      this.db.query<{ address: string; attributes_hash: string; instance: JsonObject }>(
        `SELECT address, attributes_hash, instance FROM resources
          WHERE state_id = $1 AND create_version <= $2
            AND (delete_version IS NULL OR delete_version > $2)`,
        [stateId, version],
      );
    const before = new Map((await alive(from.version)).map((r) => [r.address, r]));
    const after = new Map((await alive(to.version)).map((r) => [r.address, r]));
    const added = [...after.keys()].filter((a) => !before.has(a)).sort();
    const removed = [...before.keys()].filter((a) => !after.has(a)).sort();
    const changed: StateDiff['changed'] = [];
    for (const [address, b] of [...before].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))) {
      const a = after.get(address);
      if (!a || a.attributes_hash === b.attributes_hash) continue;
      const { attributes: attrsBefore, ...restBefore } = b.instance;
      const { attributes: attrsAfter, ...restAfter } = a.instance;
      const attributes = changedPaths(attrsBefore, attrsAfter);
      const members = [
        ...new Set(changedPaths(restBefore, restAfter).map((p) => p.split(/[.[]/)[0])),
      ];
      // Same instance JSON, different hash: a resource-level field (provider, each…) changed.
      if (attributes.length === 0 && members.length === 0) members.push('resource');
      changed.push({ address, attributes, members });
    }
    return { from, to, added, removed, changed };
  }

  /** `readable`: LIKE patterns of the state names to list (null: every state). */
  async locks(readable: string[] | null = null): Promise<LockSummary[]> {
    const rows = await this.db.query<{
      name: string;
      lock_id: string;
      mode: 'read' | 'write';
      operation: string | null;
      who: string | null;
      acquired_at: Date;
      acquired_by: string;
      info: JsonObject;
    }>(
      `SELECT l.name, l.lock_id, l.mode, l.operation, l.who, l.acquired_at, l.acquired_by, l.info
         FROM state_locks l JOIN states s ON s.state_id = l.state_id AND s.deleted_at IS NULL
        WHERE $1::text[] IS NULL OR l.name LIKE ANY ($1::text[])
        ORDER BY l.name, l.acquired_at, l.lock_id`,
      [readable],
    );
    return rows.map((r) => ({
      name: r.name,
      lockId: r.lock_id,
      mode: r.mode,
      operation: r.operation,
      who: r.who,
      acquiredAt: r.acquired_at.toISOString(),
      acquiredBy: r.acquired_by,
      info: r.info,
    }));
  }

  private async stateId(name: string): Promise<string> {
    const rows = await this.db.query<{ state_id: string }>(
      'SELECT state_id FROM states WHERE name = $1 AND deleted_at IS NULL',
      [name],
    );
    if (rows.length === 0) throw new DomainError('STATE.NOT_FOUND', `no state named "${name}"`);
    return rows[0].state_id;
  }

  private select(
    name: string,
    stateId: string,
    at: VersionSelector,
  ): Promise<{ version: number; serial: number }> {
    return 'version' in at
      ? this.versionExists(name, stateId, at.version)
      : this.versionAtSerial(name, stateId, at.serial);
  }

  private async versionExists(
    name: string,
    stateId: string,
    version: number,
  ): Promise<{ version: number; serial: number }> {
    const rows = await this.db.query<{ serial: string }>(
      'SELECT serial FROM state_versions WHERE state_id = $1 AND version = $2',
      [stateId, version],
    );
    if (rows.length === 0) {
      throw new DomainError('VERSION.NOT_FOUND', `state "${name}" has no version ${version}`);
    }
    await this.lifecyclesOfListed(version);
    return { version, serial: Number(rows[0].serial) };
  }

  private async versionAtSerial(
    name: string,
    stateId: string,
    serial: number,
  ): Promise<{ version: number; serial: number }> {
    const rows = await this.db.query<{ version: number }>(
      'SELECT max(version) AS version FROM state_versions WHERE state_id = $1 AND serial = $2',
      [stateId, serial],
    );
    if (rows[0]?.version == null) {
      throw new DomainError(
        'VERSION.NOT_FOUND',
        `state "${name}" has no version with serial ${serial}`,
      );
    }
    await this.lifecyclesOfListed(rows[0].version);
    return { version: rows[0].version, serial };
  }

  private async currentVersion(
    name: string,
    stateId: string,
  ): Promise<{ version: number; serial: number }> {
    const rows = await this.db.query<{ current_version: number; current_serial: string | null }>(
      'SELECT current_version, current_serial FROM states WHERE state_id = $1',
      [stateId],
    );
    if (!rows[0] || rows[0].current_serial === null) {
      throw new DomainError('VERSION.NOT_FOUND', `state "${name}" has no version yet`);
    }
    await this.lifecyclesOfListed(rows[0].current_version);
    return { version: rows[0].current_version, serial: Number(rows[0].current_serial) };
  }

  /** The same wait, and the same refusal when it fails, as a past version's document. */
  private async lifecyclesOfListed(version: number): Promise<void> {
    if (this.projections === undefined) return;
    try {
      await lifecyclesOfListedVersions(this.db, this.projections);
    } catch (cause) {
      throw new DomainError(
        'SERVER.UNAVAILABLE',
        `version ${version} is not fully projected yet; retry shortly`,
        undefined,
        { cause },
      );
    }
  }
}

function summary(r: SummaryRow): ResourceSummary {
  return {
    address: r.address,
    resourceAddress: r.resource_address,
    mode: r.mode,
    type: r.type,
    name: r.name,
    module: r.module_path,
    indexKey: r.index_key,
    deposedKey: r.deposed_key,
    provider: r.provider,
    status: r.status,
    sinceVersion: r.create_version,
    sinceSerial: Number(r.create_serial),
  };
}

// Kept apart from the "alive now" condition, which the partial indexes on
// `delete_version IS NULL` serve.
const ALIVE_AT_3 = 'r.create_version <= $3 AND (r.delete_version IS NULL OR r.delete_version > $3)';

/** `module.x.*` → `module.x.%`; LIKE's own wildcards in the glob are matched literally. */
export function globToLike(glob: string): string {
  return glob
    .replace(/[\\%_]/g, (c) => `\\${c}`)
    .replace(/\*/g, '%')
    .replace(/\?/g, '_');
}
