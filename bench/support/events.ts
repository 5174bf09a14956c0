import { randomUUID } from 'node:crypto';
import type { EventToAppend } from '../../src/application/ports/event-store.port';

const OPERATIONS = ['OperationTypeApply', 'OperationTypePlan', 'OperationTypeInvalid'];

/**
 * One event shaped like the store's real traffic: a `LockAcquired` carrying
 * Terraform's LockInfo verbatim, about 300 bytes of data JSON, plus the
 * metadata every command carries (actor, correlation and causation ids,
 * timestamp), about 190 bytes more.
 */
export function benchEvent(seq: number, correlationId: string = randomUUID()): EventToAppend {
  const created = new Date(1_767_225_600_000 + seq * 1000).toISOString();
  return {
    eventId: randomUUID(),
    type: 'LockAcquired',
    schemaVersion: 1,
    data: {
      stateId: '7c9e6679-7425-40de-944b-e07fc1f90ae7',
      lockId: randomUUID(),
      info: {
        ID: randomUUID(),
        Operation: OPERATIONS[seq % OPERATIONS.length],
        Info: '',
        Who: `runner@ci-${(seq % 97).toString(16).padStart(4, '0')}`,
        Version: '1.9.8',
        Created: created,
        Path: 'envs/prod/eu-west-1/network',
      },
    },
    metadata: {
      actor: 'ci-runner@platform.example.com',
      correlationId,
      causationId: '3f2b8a4e-55d1-4c1a-9b7e-0c2f6f1d9e21',
      occurredAt: created,
    },
  };
}

/** JSON sizes of one event as the store serialises it. */
export function eventBytes(event: EventToAppend): { data: number; metadata: number } {
  return {
    data: Buffer.byteLength(JSON.stringify(event.data)),
    metadata: Buffer.byteLength(JSON.stringify(event.metadata)),
  };
}
