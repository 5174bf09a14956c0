import { DomainError } from '../shared/domain-error';
import { textProblem } from '../shared/storable-text';
import { findNonJson, isJsonObject, JsonObject, JsonValue } from '../terraform/json-value';
import { STATE_INVALID } from '../terraform/parse-state-document';

/**
 * Terraform's LockInfo as the client sent it. We keep every member verbatim
 * (and return it verbatim to a client that loses a lock race): terraform
 * prints it to the user and some tools parse it.
 */
export interface LockInfo {
  ID: string;
  Operation?: string;
  Info?: string;
  Who?: string;
  Version?: string;
  Created?: string;
  Path?: string;
  [extra: string]: JsonValue | undefined;
}

/**
 * The members that get columns of their own (state_locks.lock_id, operation,
 * who) must be text PostgreSQL can hold; terraform writes plain strings
 * there. Every other member is kept exactly, NUL characters included.
 */
const TEXT_MEMBERS = ['ID', 'Operation', 'Who'] as const;

function invalid(message: string): DomainError {
  return new DomainError(STATE_INVALID, `lock info ${message}`);
}

/** A LockInfo from a request: refuses what could not be stored and listed. */
export function parseLockInfo(value: unknown): LockInfo {
  if (!isJsonObject(value)) throw invalid('must be a JSON object');
  const bad = findNonJson(value);
  if (bad !== null) throw invalid(`${bad} is not plain JSON (e.g. a number too large)`);
  if (typeof value.ID !== 'string' || value.ID === '')
    throw invalid('ID must be a non-empty string');
  for (const member of TEXT_MEMBERS) {
    const v = value[member];
    if (v === undefined) continue;
    if (typeof v !== 'string') throw invalid(`${member} must be a string`);
    const problem = textProblem(v);
    if (problem !== null) throw invalid(`${member} ${problem}`);
  }
  return value as LockInfo;
}

/** A LockInfo read back from our own store (a snapshot): only its shape is checked. */
export function storedLockInfo(value: unknown): LockInfo {
  if (!isJsonObject(value) || typeof value.ID !== 'string') {
    throw new DomainError('SNAPSHOT.INVALID', 'state snapshot: lock');
  }
  return value as JsonObject as LockInfo;
}
