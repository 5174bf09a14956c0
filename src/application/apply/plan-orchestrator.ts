import { configAddressOf } from '../../domain/apply/addresses';
import type { KlPlan } from '../../domain/apply/kl-plan';
import type { PlanResourceDelta } from '../../domain/quota';
import type { LocalsLookup } from '../../domain/apply/config-graph';
import { DomainError } from '../../domain/shared/domain-error';
import { parseInstanceAddress } from '../../domain/terraform/instance-address';
import { Clock } from '../ports/clock.port';
import { ApplyServerPort } from './apply-server.port';
import { chooseLane, laneReservations, Protocol } from './state-lanes';
import { ConfigReader, TerraformWorkspaces } from './terraform-workspace.port';
import { prepareConfiguration, workspaceLocals } from './workspace-config';

export interface PlanRequest {
  server: string;
  state: string;
  configDir: string;
  files: string[] | null;
  targets: string[];
  refresh: boolean;
  /** Which lane to try (ADR 0029): http = the full-trunk lane. */
  protocol: Protocol;
  /** Called once terraform has started: what the caller can ask meanwhile. */
  whileTerraformRuns?: () => void;
}

export interface PlanOutcome {
  plan: KlPlan;
  /** What the plan does to the count a quota limits (creates, deletes, imports). */
  resources: PlanResourceDelta;
  warnings: string[];
  /** Seconds spent in terraform (init, plan, show). */
  terraformSeconds: number;
  /**
   * kl's private directory being removed: terraform is done with it, so the
   * caller goes on (the quota check, writing the plan) meanwhile and awaits
   * this before it exits.
   */
  cleanup: Promise<void>;
}

/**
 * `kl plan`: the preflight plan of ADR 0007's revised model. Terraform plans
 * in a private directory against the trunk (or, with `-f`, the part of it the
 * scoped configuration describes: cut from the whole trunk, or on the
 * state-engine lane fetched as the server's slice); kl turns the result into
 * write and read sets, the reservations `kl apply` will ask for, and the lane
 * it will run on.
 */
export class PlanOrchestrator {
  constructor(
    private readonly server: ApplyServerPort,
    private readonly reader: ConfigReader,
    private readonly workspaces: TerraformWorkspaces,
    private readonly clock: Clock,
  ) {}

  async plan(request: PlanRequest, signal?: AbortSignal): Promise<PlanOutcome> {
    // What the server offers does not depend on the configuration: asked while it is read.
    const offer = request.protocol === 'http' ? undefined : this.server.engineOffer();
    offer?.catch(() => undefined); // awaited by chooseLane; unawaited only if reading failed
    const config = prepareConfiguration(this.reader, request.configDir, request.files);
    // The lane decides where the slice comes from: the whole trunk or the server's slice.
    const choice = config.then((c) =>
      chooseLane(this.server, request.protocol, request.state, c.footprint, offer),
    );
    const state = choice.then((l) => l.slice);
    state.catch(() => undefined); // the workspace's to await (a failure is the plan's error)
    // kl's private directory is copied meanwhile; the root files follow, and terraform may
    // start on them while the lane's state is still on its way (it reads the state last).
    const workspace = await this.workspaces.open(
      request.configDir,
      config.then((c) => ({ rootFiles: c.rootFiles, state })),
    );
    const started = this.clock.now().getTime();
    let cleanup: Promise<void> | null = null;
    let planned: Promise<unknown> | null = null;
    let locals: Promise<LocalsLookup> | null = null;
    try {
      await workspace.init(signal);
      planned = workspace.plan({ targets: request.targets, refresh: request.refresh }, signal);
      planned.catch(() => undefined); // awaited below, or before the directory is removed
      const inits = workspace.initialisations;
      const lane = await choice;
      const prepared = await config;
      const slice = lane.slice;
      // The workspace hands the lane's state to terraform on this same answer, in the promise
      // jobs queued with it; terraform, already started, may be waiting for it. What kl does
      // while terraform runs begins after those jobs, not between the answer and terraform.
      await new Promise((resolve) => setImmediate(resolve));
      // The modules' locals depend only on the configuration terraform init installed: read
      // while terraform runs, again after only if plan() had to run a fresh init.
      locals = workspaceLocals(this.reader, workspace);
      locals.catch(() => undefined); // awaited below, or before the directory is removed
      request.whileTerraformRuns?.();
      // What reads terraform's answer is loaded while terraform runs, not at kl's start.
      const [{ applySets }, { describeCounts, KL_PLAN_FORMAT }, json, { planResourceDelta }] =
        await Promise.all([
          import('../../domain/apply/apply-sets'),
          import('../../domain/apply/kl-plan'),
          import('../../domain/apply/plan-json'),
          import('../../domain/quota'),
        ]);
      const { countChanges, isWrite, parsePlanJson, PLAN_INVALID } = json;
      const raw = await planned;
      const terraformSeconds = (this.clock.now().getTime() - started) / 1000;
      const lookup =
        workspace.initialisations === inits
          ? await locals
          : await workspaceLocals(this.reader, workspace);
      // Terraform is done with its directory: removed while its answer is read.
      cleanup = workspace.dispose();
      const plan = parsePlanJson(raw);
      if (plan.errored) throw new DomainError(PLAN_INVALID, 'terraform reported an errored plan');
      const sets = applySets(plan, slice, lookup, { scoped: prepared.footprint !== null });
      const writes = plan.changes.filter((c) => isWrite(c.kind));
      const counts = countChanges(writes);
      const warnings = [
        ...prepared.warnings,
        ...this.warnings(plan.drift, sets, prepared.footprint),
      ];
      const summary =
        writes.length === 0 && sets.outputWrites.length === 0
          ? 'No changes.'
          : `${describeCounts(counts)}.`;
      return {
        terraformSeconds,
        cleanup,
        warnings,
        resources: planResourceDelta(plan.changes),
        plan: {
          format: KL_PLAN_FORMAT,
          createdAt: this.clock.now().toISOString(),
          server: request.server,
          state: request.state,
          baseVersion: lane.version,
          baseSerial: slice.serial,
          lineage: slice.lineage,
          terraformVersion: plan.terraformVersion,
          configDir: request.configDir,
          files: request.files,
          targets: request.targets,
          refresh: request.refresh,
          variables: plan.variables,
          changes: writes.map((c) => ({ address: c.address, action: c.kind })),
          writeSet: sets.writeSet,
          readSet: sets.readSet,
          outputWrites: sets.outputWrites,
          footprint: prepared.footprint,
          reservations: laneReservations(sets.reservations, lane.serverReservations ?? null),
          counts,
          summary,
          lane: lane.lane,
          laneReasons: lane.reasons,
          scope: lane.scope,
        },
      };
    } catch (e) {
      // terraform is gone (killed if its state never came) before its directory is removed.
      await planned?.catch(() => undefined);
      await locals?.catch(() => undefined);
      await (cleanup ?? workspace.dispose());
      throw e;
    }
  }

  private warnings(
    drift: string[],
    sets: { writeSet: string[]; readSet: string[] },
    footprint: string[] | null,
  ): string[] {
    const out: string[] = [];
    const writes = new Set(sets.writeSet);
    const drifted = drift.filter(
      (a) => !writes.has(a) && parseInstanceAddress(a).mode === 'managed',
    );
    if (drifted.length > 0) {
      out.push(
        `terraform saw drift on ${list(drifted)}, outside the write set: kl apply will refuse to commit it; run kl refresh first`,
      );
    }
    if (footprint !== null) {
      const outside = sets.readSet.filter((a) => {
        const config = configAddressOf(parseInstanceAddress(a));
        return !footprint.some((f) => config === f || config.startsWith(f + '.'));
      });
      if (outside.length > 0) {
        out.push(
          `${list(outside)} ${outside.length === 1 ? 'is' : 'are'} linked to this change by dependencies but outside the -f files, so not planned with it: plan ${outside.length === 1 ? 'it' : 'them'} after this apply`,
        );
      }
    }
    return out;
  }
}

function list(addresses: string[]): string {
  const shown = addresses.slice(0, 5).join(', ');
  return addresses.length > 5 ? `${shown} and ${addresses.length - 5} more` : shown;
}
