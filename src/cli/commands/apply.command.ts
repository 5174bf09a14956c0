import { randomUUID } from 'node:crypto';
import { Command } from 'commander';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ApplyOrchestrator, ApplyOutcome } from '../../application/apply/apply-orchestrator';
import { klPlanFromJson, KlPlan } from '../../domain/apply/kl-plan';
import { MAX_LEASE_SECONDS, MIN_LEASE_SECONDS } from '../../domain/state/reserve';
import { defaultHclUnitsCache, HclConfigReader } from '../../infrastructure/terraform/hcl-reader';
import { TempWorkspaces } from '../../infrastructure/terraform/temp-workspace';
import { defaultActor, KldHttpClient } from '../../infrastructure/rest/kld-http-client';
import { RestApplyServer } from '../../infrastructure/rest/rest-apply-server';
import { describeConflict, describeHolder, describeReservations } from '../apply-render';
import { formatDuration, parseDuration } from '../durations';
import { errorLine, terminalSafeJson, visibleLines } from '../terminal-text';
import { APPLY_EXIT, exitCodeOf, onceSignalled, usageExit3, UsageError } from './apply-cli';

interface ApplyCommandOptions {
  wait?: string | true;
  actor: string;
  lease: string;
}

interface Globals {
  server: string;
  token?: string;
  format: 'table' | 'json' | 'csv';
}

const DEFAULT_WAIT_SECONDS = 60 * 60;

/** `kl apply kl-plan.json`: reserve, apply in a private directory, commit the write set. */
export function registerApplyCommand(program: Command): Command {
  const command = program
    .command('apply')
    .description(
      'apply a kl plan on its own part of the state, in parallel with applies on other parts',
    )
    .argument('<plan-file>', 'the kl-plan.json written by kl plan')
    .option(
      '--wait [duration]',
      'when another run holds the addresses, wait for it (up to 1h, or the given 90s / 15m / 1h)',
    )
    .option(
      '--actor <actor>',
      'who applies, recorded with the run and its reservations',
      defaultActor(),
    )
    .option('--lease <duration>', 'reservation lease, renewed while the apply runs', '15m')
    .addHelpText(
      'after',
      '\nExit status: 0 committed, 1 apply failed (nothing committed), 2 conflict or stale plan (re-plan),' +
        '\n3 usage or configuration, 130/143 interrupted by SIGINT/SIGTERM (nothing committed).' +
        '\nSee docs/usage/parallel-apply.md.',
    );
  usageExit3(command).action(async (file: string, options: ApplyCommandOptions, cmd: Command) => {
    process.exitCode = await runApply(file, options, cmd).catch((e: unknown) => {
      process.stderr.write(`kl: ${errorLine(e)}\n`);
      return exitCodeOf(e);
    });
  });
  return command;
}

function readPlan(file: string): KlPlan {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new UsageError(`${file} is not JSON: is it a kl-plan.json written by kl plan?`);
  }
  try {
    return klPlanFromJson(raw);
  } catch (e) {
    throw new UsageError(`${file}: ${(e as Error).message}`);
  }
}

async function runApply(file: string, options: ApplyCommandOptions, cmd: Command): Promise<number> {
  const leaseSeconds = parseDuration(options.lease);
  if (
    leaseSeconds === null ||
    leaseSeconds < MIN_LEASE_SECONDS ||
    leaseSeconds > MAX_LEASE_SECONDS
  ) {
    throw new UsageError(
      `--lease must be a duration from ${MIN_LEASE_SECONDS}s to 24h, such as 90s or 15m; got "${options.lease}"`,
    );
  }
  let waitMs: number | null = null;
  if (options.wait !== undefined) {
    const seconds = options.wait === true ? DEFAULT_WAIT_SECONDS : parseDuration(options.wait);
    if (seconds === null) {
      throw new UsageError(
        `--wait takes a duration such as 90s, 15m or 1h; got "${String(options.wait)}"`,
      );
    }
    waitMs = seconds * 1000;
  }
  const plan = readPlan(file);
  const globals = cmd.optsWithGlobals<Globals>();
  const source = cmd.parent?.getOptionValueSource('server');
  const server = source === 'cli' || source === 'env' ? globals.server : plan.server;

  const http = new KldHttpClient(server, { token: globals.token, actor: options.actor });
  const reader = new HclConfigReader(defaultHclUnitsCache());
  const orchestrator = new ApplyOrchestrator(
    new RestApplyServer(http),
    reader,
    new TempWorkspaces(),
    { now: () => new Date() },
    { uuid: randomUUID },
  );
  // With --format json, stdout carries only the outcome object.
  const progress = globals.format === 'json' ? process.stderr : process.stdout;
  // Holders, actors and kld's messages are other people's text: spelled out.
  const out = (line: string) => progress.write(visibleLines(line) + '\n');
  const err = (line: string) => process.stderr.write(visibleLines(line) + '\n');
  const signals = onceSignalled();
  const started = Date.now();
  // Which lane runs, and why, before anything happens (ADR 0029 D8).
  out(
    plan.lane === 'state-engine'
      ? "lane state-engine (trusted): the coarse lock, the scope's reservations, a delta commit on the engine"
      : 'lane full: the full trunk, no state-engine coarse lock',
  );
  for (const r of plan.laneReasons) out(`  ${r}`);
  let outcome: ApplyOutcome;
  try {
    outcome = await orchestrator.apply(
      plan,
      {
        leaseSeconds,
        waitMs,
        waitStatusEveryMs: 3_000,
        info: { plan_file: path.resolve(file) },
        onEvent: (e) => {
          switch (e.type) {
            case 'acquired':
              out(
                `reservations acquired (${describeReservations(plan.reservations)}), run ${e.runId}` +
                  (e.lane === 'state-engine'
                    ? ': terraform sees the state locked by a state-engine apply'
                    : ''),
              );
              break;
            case 'waiting':
              err(
                `kl: waiting ${formatDuration(e.waitedMs)}: ` +
                  e.holders.map((h) => `${h.glob} ${describeHolder(h, Date.now())}`).join('; '),
              );
              break;
            case 'applying':
              out(`apply running... (${plan.summary})`);
              break;
            case 'terraform':
              if (
                /: (Creating|Modifying|Destroying|Still|Creation complete|Modifications complete|Destruction complete)/.test(
                  e.line,
                )
              ) {
                out(`  ${e.line}`);
              }
              break;
            case 'warning':
              err(`kl: warning: ${e.message}`);
              break;
          }
        },
      },
      signals.signal,
    );
  } catch (e) {
    err(`kl: apply failed: ${errorLine(e)}`);
    await reader.settled();
    signals.dispose();
    return signals.received ? APPLY_EXIT.signal(signals.received) : exitCodeOf(e);
  }
  // The configuration's cache entries, written meanwhile, before kl exits.
  await reader.settled();
  signals.dispose();
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (globals.format === 'json') {
    // For scripts and the bench: the outcome as one JSON object; messages still go to stderr.
    process.stdout.write(
      terminalSafeJson(JSON.stringify(outcomeJson(outcome, Date.now() - started))) + '\n',
    );
  }

  switch (outcome.status) {
    case 'committed': {
      if (globals.format === 'json') return APPLY_EXIT.ok;
      const c = plan.counts;
      out(
        `apply complete: ${c.create} created, ${c.update} updated, ${c.replace} replaced, ${c.delete} destroyed (${seconds}s)`,
      );
      out(
        `committed version ${outcome.version} at serial ${outcome.serial} (source=${outcome.lane === 'state-engine' ? 'state-engine' : 'apply'}, run=${outcome.runId}, lane=${outcome.lane})`,
      );
      return APPLY_EXIT.ok;
    }
    case 'unchanged':
      out('No changes: the plan writes nothing, so there is nothing to apply.');
      return APPLY_EXIT.ok;
    case 'conflict':
      err(`kl: ${describeConflict(outcome.holders)}`);
      err(options.wait === undefined ? 'kl: retry later, or pass --wait' : 'kl: gave up waiting');
      return APPLY_EXIT.conflict;
    case 'stale':
      err(
        `kl: the plan is stale: ${outcome.addresses
          .slice(0, 5)
          .map((a) => `${a.address} changed in version ${a.changedInVersion}`)
          .join(
            ', ',
          )}${outcome.addresses.length > 5 ? ` and ${outcome.addresses.length - 5} more` : ''} (plan base version ${plan.baseVersion}): re-plan`,
      );
      return APPLY_EXIT.conflict;
    case 'mismatch':
      err(`kl: ${outcome.message}`);
      return APPLY_EXIT.conflict;
    case 'failed':
    case 'aborted': {
      err(
        `kl: apply ${outcome.status === 'aborted' ? 'interrupted' : 'failed'}: ${outcome.message}`,
      );
      if (outcome.outputState !== null && outcome.runId !== null) {
        const kept = path.join(
          path.dirname(path.resolve(file)),
          `kl-apply-${outcome.runId}.tfstate`,
        );
        let local = '';
        try {
          fs.writeFileSync(kept, outcome.outputState, { mode: 0o600 });
          local = kept;
        } catch (e) {
          err(`kl: could not save terraform's state to ${kept}: ${(e as Error).message}`);
        }
        const where = [
          outcome.keptOnServer ? `with run ${outcome.runId} (kl runs ${plan.state})` : '',
          local,
        ]
          .filter((w) => w !== '')
          .join(' and in ');
        err(
          `kl: nothing was committed; terraform may have changed real infrastructure: its resulting state is kept ${where}`,
        );
      } else {
        err('kl: nothing was committed');
      }
      if (outcome.status === 'aborted') return APPLY_EXIT.signal(signals.received ?? 'SIGINT');
      return APPLY_EXIT.failed;
    }
  }
}

function outcomeJson(o: ApplyOutcome, wallMs: number): Record<string, unknown> {
  switch (o.status) {
    case 'committed':
      return {
        status: o.status,
        run_id: o.runId,
        lane: o.lane,
        version: o.version,
        serial: o.serial,
        upserts: o.upserts,
        deletes: o.deletes,
        wall_ms: wallMs,
        acquire_ms: o.timings.acquireMs,
        slice_ms: o.timings.sliceMs,
        terraform_ms: o.timings.terraformMs,
        commit_ms: o.timings.commitMs,
      };
    case 'unchanged':
      return { status: o.status, wall_ms: wallMs };
    case 'conflict':
      return { status: o.status, holders: o.holders, wall_ms: wallMs };
    case 'stale':
      return { status: o.status, addresses: o.addresses, wall_ms: wallMs };
    case 'mismatch':
      return { status: o.status, run_id: o.runId, message: o.message, wall_ms: wallMs };
    default:
      return { status: o.status, run_id: o.runId, message: o.message, wall_ms: wallMs };
  }
}
