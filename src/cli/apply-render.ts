import { Holder } from '../application/apply/apply-server.port';
import { KlPlan } from '../domain/apply/kl-plan';
import { formatDuration } from './durations';

/**
 * `held by alice (run 4f2a…, acquired 12s ago, expires in 14m48s)`; a
 * Terraform lock is named with its LockInfo.
 */
export function describeHolder(h: Holder, now: number): string {
  const acquired = Date.parse(h.acquiredAt);
  const age = Number.isNaN(acquired) ? '' : `, acquired ${formatDuration(now - acquired)} ago`;
  const expires = h.expiresAt === null ? NaN : Date.parse(h.expiresAt);
  const left = Number.isNaN(expires)
    ? ''
    : expires > now
      ? `, expires in ${formatDuration(expires - now)}`
      : ', lease expired';
  if (h.kind === 'apply') return `held by ${h.actor || 'someone'} (run ${h.runId}${age}${left})`;
  const info = h.lockInfo ?? {};
  const who = typeof info.Who === 'string' && info.Who !== '' ? info.Who : h.actor || 'someone';
  const op =
    typeof info.Operation === 'string' && info.Operation !== '' ? `, ${info.Operation}` : '';
  const what = h.kind === 'terraform-plan' ? 'a terraform plan' : 'a Terraform lock';
  return `held by ${what} of ${who} (lock ${h.lockId || h.runId}${op}${age})`;
}

/** The ADR's conflict message: one block per contested glob. */
export function describeConflict(holders: Holder[], now = Date.now()): string {
  if (holders.length === 0) return 'reservation conflict (the server named no holder)';
  return holders
    .map((h) => `reservation conflict on ${h.glob}:\n  ${describeHolder(h, now)}`)
    .join('\n');
}

/** `write: a, b; read: c` */
export function describeReservations(r: { write: string[]; read: string[] }): string {
  const list = (globs: string[]) => (globs.length === 0 ? 'none' : globs.join(', '));
  return `write: ${list(r.write)}; read: ${list(r.read)}`;
}

const SYMBOL: Record<string, string> = {
  create: '+',
  update: '~',
  replace: '-/+',
  delete: '-',
  forget: '.',
};

/** What `kl plan` prints. */
export function renderPlan(plan: KlPlan, file: string): string {
  const lines = [
    `kl plan of ${plan.state} at version ${plan.baseVersion} (serial ${plan.baseSerial})` +
      (plan.files ? `, scoped to ${plan.files.join(', ')}` : '') +
      (plan.targets.length > 0 ? `, targets ${plan.targets.join(', ')}` : ''),
    '',
  ];
  for (const c of plan.changes)
    lines.push(`  ${SYMBOL[c.action] ?? '?'} ${c.address} (${c.action})`);
  for (const o of plan.outputWrites) lines.push(`  ~ output.${o}`);
  if (plan.changes.length > 0 || plan.outputWrites.length > 0) lines.push('');
  lines.push(`Plan: ${plan.summary}`);
  lines.push('Reservations:');
  for (const g of plan.reservations.write) lines.push(`  write ${g}`);
  for (const g of plan.reservations.read) lines.push(`  read  ${g}`);
  if (plan.reservations.write.length + plan.reservations.read.length === 0) lines.push('  none');
  lines.push(...renderLane(plan));
  lines.push(`Base serial ${plan.baseSerial}. Saved ${file}; apply it with: kl apply ${file}`);
  return lines.join('\n') + '\n';
}

const CLASSIFIED: Record<string, string> = {
  undeployed: 'never in this state: the configuration creates it',
  removed: 'in an earlier version, gone now',
  unknown: 'matches nothing in this state, now or before',
};

/** `100,008`: a regex, because the first toLocaleString loads ICU (tens of ms of every kl plan). */
export function groupDigits(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

function kib(bytes: number): string {
  return bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} KiB`;
}

/** What scope expansion said and which lane kl apply will take (ADR 0029 D8: never pretend). */
export function renderLane(plan: KlPlan): string[] {
  const lines: string[] = [];
  const s = plan.scope;
  if (s !== null) {
    lines.push(`Scope expansion: ${s.provablySafe ? 'provably safe' : 'NOT provably safe'}`);
    for (const u of s.unresolved) {
      lines.push(
        `  ${u.classification.padEnd(10)} ${u.candidate} (${CLASSIFIED[u.classification] ?? u.classification})`,
      );
    }
    for (const c of s.closure) {
      lines.push(
        `  ${c.direction.padEnd(10)} ${c.address} (${c.direction === 'dependency' ? `${c.via} depends on it` : `it depends on ${c.via}`})`,
      );
    }
    if (s.slice !== null) {
      lines.push(
        `  slice: ${s.slice.instances} of ${groupDigits(s.slice.stateInstances)} instances, ${kib(s.slice.bytes)} fetched (not the whole state)`,
      );
    }
  }
  const name =
    plan.lane === 'state-engine'
      ? 'state-engine (trusted: coarse lock, reservations, delta commit)'
      : 'full (full trunk, no state-engine coarse lock)';
  lines.push(`Lane: ${name}`);
  for (const r of plan.laneReasons) lines.push(`  ${r}`);
  return lines;
}
