import { DomainError } from '../shared/domain-error';
import { isJsonObject } from '../terraform/json-value';
import { LockInfo, storedLockInfo } from './lock-info';
import { CommitSource } from './state.commands';
import { CommitHead, StateAggregate } from './state.model';

/** Bump when the snapshot shape changes; older snapshots are then ignored and the stream replayed. */
export const STATE_SNAPSHOT_SCHEMA = 'state/2';

export type StateSnapshot =
  | { status: 'missing' }
  | {
      status: 'active';
      stateId: string;
      name: string;
      lock: LockInfo | null;
      version: number;
      serial: number | null;
      lineage: string | null;
      /** [address, hash] pairs, in the aggregate's order. */
      instances: [string, string][];
      /** [name, hash] pairs of the current outputs. */
      outputs: [string, string][];
      /** Absent in snapshots written before it existed. */
      head?: CommitHead | null;
    }
  | { status: 'deleted'; stateId: string; name: string };

export function toSnapshot(state: StateAggregate): StateSnapshot {
  switch (state.status) {
    case 'missing':
      return { status: 'missing' };
    case 'deleted':
      return { status: 'deleted', stateId: state.stateId, name: state.name };
    case 'active':
      return {
        status: 'active',
        stateId: state.stateId,
        name: state.name,
        lock: state.lock,
        version: state.version,
        serial: state.serial,
        lineage: state.lineage,
        instances: [...state.instances],
        outputs: [...state.outputs],
        head: state.head,
      };
    default: {
      const never: never = state;
      throw new Error(`unexpected state ${JSON.stringify(never)}`);
    }
  }
}

function bad(what: string): never {
  throw new DomainError('SNAPSHOT.INVALID', `state snapshot: ${what}`);
}

const str = (v: unknown, what: string): string => (typeof v === 'string' ? v : bad(what));
const int = (v: unknown, what: string): number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : bad(what);

/** A snapshot without a head only means a retry of its last commit becomes a new version. */
function commitHead(json: unknown): CommitHead | null {
  if (!isJsonObject(json)) return null;
  return {
    checksum: str(json.checksum, 'head checksum'),
    source: str(json.source, 'head source') as CommitSource,
    lockId: json.lockId === null ? null : str(json.lockId, 'head lock id'),
  };
}

function pairs(json: unknown, what: string): Map<string, string> {
  if (!Array.isArray(json)) return bad(`${what}s`);
  const map = new Map<string, string>();
  for (const pair of json) {
    if (!Array.isArray(pair) || pair.length !== 2) return bad(`${what}s`);
    map.set(str(pair[0], `${what} key`), str(pair[1], `${what} hash`));
  }
  return map;
}

export function fromSnapshot(json: unknown): StateAggregate {
  if (!isJsonObject(json)) return bad('not an object');
  switch (json.status) {
    case 'missing':
      return { status: 'missing' };
    case 'deleted':
      return {
        status: 'deleted',
        stateId: str(json.stateId, 'stateId'),
        name: str(json.name, 'name'),
      };
    case 'active': {
      return {
        status: 'active',
        stateId: str(json.stateId, 'stateId'),
        name: str(json.name, 'name'),
        lock: json.lock === null ? null : storedLockInfo(json.lock),
        version: int(json.version, 'version'),
        serial: json.serial === null ? null : int(json.serial, 'serial'),
        lineage: json.lineage === null ? null : str(json.lineage, 'lineage'),
        instances: pairs(json.instances, 'instance'),
        outputs: pairs(json.outputs, 'output'),
        head: commitHead(json.head),
      };
    }
    default:
      return bad(`unknown status ${JSON.stringify(json.status)}`);
  }
}
