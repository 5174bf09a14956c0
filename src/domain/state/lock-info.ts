import { DomainError } from '../shared/domain-error';
import { findNonJson, isJsonObject, JsonValue } from '../terraform/json-value';
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

export function parseLockInfo(value: unknown): LockInfo {
  if (!isJsonObject(value) || findNonJson(value) !== null) {
    throw new DomainError(STATE_INVALID, 'lock info must be a JSON object');
  }
  if (typeof value.ID !== 'string' || value.ID === '') {
    throw new DomainError(STATE_INVALID, 'lock info ID must be a non-empty string');
  }
  return value as LockInfo;
}
