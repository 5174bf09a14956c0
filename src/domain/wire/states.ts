/**
 * The JSON kld's read routes answer (docs/api.md), as plain types: the server
 * builds them, and `kl` and the web dashboard (which cannot import anything
 * outside the domain) read them.
 */
import type { JsonObject, JsonValue } from '../terraform/json-value';

export interface StateVersionSummary {
  version: number;
  serial: number;
  lineage: string;
  /** The previous version's lineage when this version changed it (`state push -force`); else null. */
  lineageChangedFrom: string | null;
  source: string;
  actor: string;
  terraformVersion: string;
  instanceCount: number;
  resourceCount: number;
  checksum: string;
  createdAt: string;
}

/** A state's versions, oldest first; `deletedAt` set when the state was deleted. */
export interface StateHistory {
  stateId: string;
  deletedAt: string | null;
  versions: StateVersionSummary[];
}

export interface ResourceSummary {
  address: string;
  resourceAddress: string;
  mode: string;
  type: string;
  name: string;
  module: string;
  indexKey: string | null;
  deposedKey: string | null;
  provider: string;
  status: string | null;
  /** Version and serial that opened this lifecycle (when the object last changed). */
  sinceVersion: number;
  sinceSerial: number;
}

export interface ResourceLifecycle {
  createVersion: number;
  createSerial: number;
  deleteVersion: number | null;
  deleteSerial: number | null;
  attributesHash: string;
  attributes: JsonValue | null;
  dependencies: JsonValue | null;
}

export interface ResourceDetail extends ResourceSummary {
  schemaVersion: number;
  attributes: JsonValue | null;
  sensitiveAttributes: JsonValue | null;
  dependencies: JsonValue | null;
  instance: JsonObject;
}

export interface StateDiff {
  from: { version: number; serial: number };
  to: { version: number; serial: number };
  added: string[];
  removed: string[];
  /** Attribute paths under `attributes`; `members` names other instance fields that changed. */
  changed: { address: string; attributes: string[]; members: string[] }[];
}

export interface LockSummary {
  name: string;
  lockId: string;
  /** read: a plan's lock, shared with other plans; write: exclusive. */
  mode: 'read' | 'write';
  operation: string | null;
  who: string | null;
  acquiredAt: string;
  acquiredBy: string;
  info: JsonObject;
}
