import { createHash, randomUUID } from 'node:crypto';
import type { EventToAppend } from '../../src/application/ports/event-store.port';

const ADDRESSES = [
  'module.network.aws_subnet.private["eu-west-1a"]',
  'module.network.aws_route_table_association.private[2]',
  'aws_iam_role_policy_attachment.node_group["AmazonEKSWorkerNodePolicy"]',
  'module.db.aws_db_instance.this[0]',
];

/**
 * One event shaped like the store's real traffic: a `LifecycleClosed` with a
 * Terraform resource address and a SHA-256, plus the metadata a command
 * carries (actor, correlation and causation ids, timestamp). About 300 bytes
 * of JSON in all, which is what the targets assume.
 */
export function benchEvent(seq: number, correlationId: string = randomUUID()): EventToAppend {
  return {
    type: 'LifecycleClosed',
    data: {
      stateId: '7c9e6679-7425-40de-944b-e07fc1f90ae7',
      version: 1 + (seq >> 4),
      serial: 3 + (seq >> 4),
      address: ADDRESSES[seq % ADDRESSES.length],
      hash: createHash('sha256').update(String(seq)).digest('hex'),
    },
    metadata: {
      actor: 'ci-runner@platform.example.com',
      correlationId,
      causationId: '3f2b8a4e-55d1-4c1a-9b7e-0c2f6f1d9e21',
      occurredAt: new Date(1_767_225_600_000 + seq).toISOString(),
    },
  };
}

/** JSON size of one event as the store serialises it (data + metadata + type). */
export function eventBytes(event: EventToAppend): number {
  return (
    Buffer.byteLength(JSON.stringify(event.data)) +
    Buffer.byteLength(JSON.stringify(event.metadata)) +
    Buffer.byteLength(event.type)
  );
}
