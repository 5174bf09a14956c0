import { Command } from 'commander';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PlanOrchestrator } from '../../application/apply/plan-orchestrator';
import { stringifyJson } from '../../domain/terraform/lossless-json';
import { discoverHttpBackend } from '../../infrastructure/terraform/backend-discovery';
import { defaultHclUnitsCache, HclConfigReader } from '../../infrastructure/terraform/hcl-reader';
import { TempWorkspaces } from '../../infrastructure/terraform/temp-workspace';
import { defaultActor, KldHttpClient } from '../../infrastructure/rest/kld-http-client';
import { RestApplyServer } from '../../infrastructure/rest/rest-apply-server';
import { loadKlConfig, withoutCredentials } from '../kl-config';
import { KilolockClient } from '../kilolock-client';
import { QuotaPreflight, quotaPreflight, reportPreflight } from '../quota-preflight';
import { errorLine, terminalSafeJson, visible, visibleLines } from '../terminal-text';
import { APPLY_EXIT, exitCodeOf, onceSignalled, usageExit3, UsageError } from './apply-cli';

interface PlanOptions {
  file: string[];
  target: string[];
  out: string;
  state?: string;
  refresh: boolean;
}

interface Globals {
  server: string;
  token?: string;
  format: 'table' | 'json' | 'csv';
}

const collect = (value: string, all: string[]) => [...all, value];

/** `kl plan [DIR]`: the preflight plan of a parallel apply, saved as kl-plan.json. */
export function registerPlanCommand(program: Command): void {
  const command = program
    .command('plan')
    .description(
      'plan a change in a private directory against the trunk and save the reservations kl apply will take (kl-plan.json)',
    )
    .argument('[dir]', 'terraform configuration directory', '.')
    .option(
      '-f, --file <file>',
      'plan only this .tf file and what it needs (repeatable)',
      collect,
      [],
    )
    .option(
      '--target <address>',
      "narrow the plan like terraform's -target (repeatable)",
      collect,
      [],
    )
    .option('-o, --out <file>', 'where to save the plan', 'kl-plan.json')
    .option(
      '--state <name>',
      'state name (default: the directory\'s backend "http" address, as terraform init recorded it)',
    )
    .option('--no-refresh', 'plan without refreshing (terraform -refresh=false)')
    .addHelpText(
      'after',
      "\nExit status: 0 planned (a quota's soft limit only warns), 1 terraform failed, 2 over a quota's hard limit (no plan saved)," +
        '\n3 usage or configuration, 130/143 interrupted.' +
        '\nWith protocol state-engine or auto (--protocol, KL_PROTOCOL, .kl.toml) and -f, the server' +
        '\nexpands the scope and kl fetches only its slice; kl apply then runs on the trusted' +
        '\nstate-engine lane, or on the full-trunk lane when the server cannot prove the scope safe.' +
        '\nSee docs/usage/parallel-apply.md and docs/state-engine.md.',
    );
  usageExit3(command).action(async (dir: string, options: PlanOptions, cmd: Command) => {
    process.exitCode = await runPlan(dir, options, cmd);
  });
}

export interface Target {
  server: string;
  state: string;
}

/** `--state`/`--server` (or KL_SERVER_URL) first, then what `terraform init` recorded. */
export async function resolveTarget(
  cmd: Command,
  configDir: string,
  stateFlag: string | undefined,
): Promise<Target> {
  const globals = cmd.optsWithGlobals<Globals>();
  const source = cmd.parent?.getOptionValueSource('server');
  const explicit = source === 'cli' || source === 'env' ? globals.server : null;
  let backend: Awaited<ReturnType<typeof discoverHttpBackend>> = null;
  try {
    backend = await discoverHttpBackend(configDir);
  } catch (e) {
    // Another backend does not matter when the flags say everything.
    if (!(stateFlag && explicit)) throw e;
  }
  const state = stateFlag ?? backend?.state;
  if (!state) {
    throw new UsageError(
      `no state to plan against: pass --state <name>, or run kl plan in a directory whose backend "http" points at kld (after terraform init)`,
    );
  }
  return { state, server: explicit ?? backend?.server ?? globals.server };
}

async function runPlan(dir: string, options: PlanOptions, cmd: Command): Promise<number> {
  const signals = onceSignalled();
  let reader: HclConfigReader | null = null;
  try {
    const configDir = path.resolve(dir);
    if (!fs.statSync(configDir, { throwIfNoEntry: false })?.isDirectory()) {
      throw new UsageError(`${dir} is not a directory`);
    }
    const files = options.file.map((f) => {
      const abs = path.resolve(f);
      const inDir = path.relative(configDir, fs.existsSync(abs) ? abs : path.resolve(configDir, f));
      if (inDir.startsWith('..') || inDir.includes(path.sep)) {
        throw new UsageError(`-f ${f}: only .tf files of ${configDir} itself can be selected`);
      }
      if (!inDir.endsWith('.tf')) throw new UsageError(`-f ${f}: not a .tf file`);
      return inDir;
    });
    const target = await resolveTarget(cmd, configDir, options.state);
    // --protocol > KL_PROTOCOL > the directory's .kl.toml > auto (kl config shows it).
    const protocol = loadKlConfig(cmd, configDir).protocol.value;
    const globals = cmd.optsWithGlobals<Globals>();
    const http = new KldHttpClient(target.server, { token: globals.token, actor: defaultActor() });
    reader = new HclConfigReader(defaultHclUnitsCache());
    const orchestrator = new PlanOrchestrator(
      new RestApplyServer(http),
      reader,
      new TempWorkspaces(),
      { now: () => new Date() },
    );
    // Most plans create and delete nothing: the quota's answer for that is asked while
    // terraform runs, and asked again with the plan's counts only when it has some.
    const quota = new KilolockClient(target.server, globals.token);
    let unchanged: Promise<QuotaPreflight> | null = null;
    // Needed only after terraform: loaded while it runs, not at kl's start nor after it.
    let rendering: Promise<typeof import('../apply-render')> | null = null;
    const whileTerraformRuns = () => {
      unchanged = quotaPreflight(quota, target.state, 0, 0);
      unchanged.catch(() => undefined); // awaited below; unawaited only if the plan fails
      rendering = import('../apply-render');
      rendering.catch(() => undefined); // awaited below; unawaited only if the plan fails
    };
    const outcome = await orchestrator.plan(
      {
        // The plan keeps where to apply, never the password of KL_SERVER_URL.
        server: withoutCredentials(target.server),
        state: target.state,
        configDir,
        files: files.length > 0 ? [...new Set(files)].sort() : null,
        targets: options.target,
        refresh: options.refresh,
        protocol,
        whileTerraformRuns,
      },
      signals.signal,
    );
    try {
      if (signals.received) return APPLY_EXIT.signal(signals.received);
      // Over the hard limit, no plan file: kl apply would be refused anyway.
      const { creates, imports, deletes } = outcome.resources;
      const preflight = await (creates + imports === 0 && deletes === 0 && unchanged !== null
        ? unchanged
        : quotaPreflight(quota, target.state, creates + imports, deletes));
      if (reportPreflight(preflight, APPLY_EXIT.conflict) !== 0) return APPLY_EXIT.conflict;
      // Loaded while terraform ran (kl-plan by the orchestrator).
      const [{ klPlanToJson }, { renderPlan }] = await Promise.all([
        import('../../domain/apply/kl-plan'),
        rendering ?? import('../apply-render'),
      ]);
      const text = stringifyJson(klPlanToJson(outcome.plan), 2) + '\n';
      // It holds the input variables' values: readable by its owner only.
      fs.writeFileSync(options.out, text, { mode: 0o600 });
      fs.chmodSync(options.out, 0o600);
      for (const w of outcome.warnings) process.stderr.write(`kl: warning: ${visible(w)}\n`);
      process.stdout.write(
        globals.format === 'json'
          ? terminalSafeJson(text)
          : visibleLines(renderPlan(outcome.plan, options.out)),
      );
      return 0;
    } finally {
      await outcome.cleanup;
    }
  } catch (e) {
    if (signals.received) return APPLY_EXIT.signal(signals.received);
    process.stderr.write(`kl: plan failed: ${errorLine(e)}\n`);
    return exitCodeOf(e);
  } finally {
    // The configuration's cache entries, written meanwhile, before kl exits.
    await reader?.settled();
    signals.dispose();
  }
}
