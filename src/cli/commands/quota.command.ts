import { Command } from 'commander';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parsePlanJson } from '../../domain/apply/plan-json';
import { planResourceDelta } from '../../domain/quota';
import { DomainError } from '../../domain/shared/domain-error';
import { parseJsonExact } from '../../domain/terraform/lossless-json';
import { runTerraform, terraformBinary } from '../../infrastructure/terraform/terraform-cli';
import { KilolockClient } from '../kilolock-client';
import { quotaPreflight, reportPreflight } from '../quota-preflight';
import { renderJson } from '../render';
import { errorLine, visible } from '../terminal-text';
import { APPLY_EXIT, exitCodeOf, usageExit3, UsageError } from './apply-cli';
import { contextOf, usage } from './context';
import { resolveTarget } from './plan.command';

function limitOption(command: Command, value: string | undefined, name: string) {
  if (value === undefined) return undefined;
  if (!/^\d{1,10}$/.test(value)) usage(command, `${name} must be a whole number, got "${value}"`);
  return Number(value);
}

/** `kl quota [STATE]`, `kl quota set|rm|rules|check`. */
export function registerQuotaCommand(program: Command): void {
  const quota = program
    .command('quota')
    .description('resource quotas of states: usage and headroom, rules (admin), plan checks');
  quota
    .command('show', { isDefault: true })
    .description('usage and headroom of a state, or of every readable state a quota governs')
    .argument('[state]', 'a state name')
    .action(async (state: string | undefined, _opts: unknown, command: Command) => {
      const { client, format, print } = contextOf(command);
      const usage = await client.quotaUsage(state);
      if (format === 'json') {
        process.stdout.write(renderJson(usage));
        return;
      }
      print({
        columns: [
          'state',
          'resources',
          'max',
          'soft',
          'headroom',
          'status',
          'quota',
          'last_overrun',
        ],
        rows: usage.map((u) => [
          u.state,
          u.resources,
          u.quota?.max_resources ?? null,
          u.quota?.soft_resources ?? null,
          u.headroom,
          u.status,
          u.quota?.glob ?? null,
          !u.last_overrun
            ? null
            : `version ${u.last_overrun.version}: ${u.last_overrun.resources} > ${u.last_overrun.level} ${u.last_overrun.limit}`,
        ]),
      });
    });
  quota
    .command('set')
    .description('limit the resources of every state matching GLOB (needs admin)')
    .argument('<glob>', 'state-name glob: team-a/*, team-a/prod/network')
    .requiredOption('--max-resources <n>', 'the hard limit: applies are refused above it')
    .option('--soft <m>', 'the soft limit (below the hard one): kl warns above it')
    .action(
      async (glob: string, opts: { maxResources: string; soft?: string }, command: Command) => {
        const max = limitOption(command, opts.maxResources, '--max-resources') as number;
        const soft = limitOption(command, opts.soft, '--soft');
        const { client } = contextOf(command);
        const answer = await client.setQuota({
          glob,
          max_resources: max,
          ...(soft === undefined ? {} : { soft_resources: soft }),
        });
        process.stderr.write(
          `kl: quota ${glob}: at most ${max} resources per state` +
            `${soft === undefined ? '' : `, warning above ${soft}`}` +
            `${answer.changed ? '' : ' (unchanged)'}\n`,
        );
      },
    );
  quota
    .command('rm')
    .description('remove the quota on GLOB (needs admin)')
    .argument('<glob>', 'the glob, as kl quota rules lists it')
    .action(async (glob: string, _opts: unknown, command: Command) => {
      const { client } = contextOf(command);
      await client.removeQuota(glob);
      process.stderr.write(`kl: quota ${glob} removed\n`);
    });
  quota
    .command('rules')
    .description('every quota rule (needs admin)')
    .action(async (_opts: unknown, command: Command) => {
      const { client, print } = contextOf(command);
      const rules = await client.quotaRules();
      print({
        columns: ['glob', 'max_resources', 'soft_resources', 'set_at', 'set_by'],
        rows: rules.map((r) => [r.glob, r.max_resources, r.soft_resources, r.set_at, r.set_by]),
      });
    });
  const check = quota
    .command('check')
    .description("would a terraform plan keep the state within its quota? (kld's verdict)")
    .requiredOption('--tf-plan <file>', 'terraform show -json output, or a saved plan file')
    .option('--state <name>', 'state name (default: the directory\'s backend "http" address)')
    .option('--dir <dir>', 'the terraform working directory', '.')
    .addHelpText(
      'after',
      '\nExit status: 0 fits (or only over the soft limit: a warning), 2 over the hard limit, 3 usage, 1 other failures.',
    );
  usageExit3(check).action(
    async (opts: { tfPlan: string; state?: string; dir: string }, command: Command) => {
      process.exitCode = await runCheck(opts, command);
    },
  );
}

async function runCheck(
  opts: { tfPlan: string; state?: string; dir: string },
  command: Command,
): Promise<number> {
  try {
    const dir = path.resolve(opts.dir);
    const plan = parsePlanJson(await planJsonOf(opts.tfPlan, dir));
    const { creates, deletes, imports } = planResourceDelta(plan.changes);
    const target = await resolveTarget(command.parent as Command, dir, opts.state);
    const globals = command.optsWithGlobals<{ token?: string }>();
    const client = new KilolockClient(target.server, globals.token);
    const found = await quotaPreflight(client, target.state, creates + imports, deletes);
    const exit = reportPreflight(found, APPLY_EXIT.conflict);
    if (found.over === null) process.stdout.write(`${visible(found.message)}\n`);
    return exit;
  } catch (e) {
    process.stderr.write(`kl: quota check failed: ${errorLine(e)}\n`);
    return exitCodeOf(e);
  }
}

/**
 * The plan as `terraform show -json` prints it: the file itself when it is
 * that JSON, else (a saved plan file, a zip) what terraform shows of it in
 * the working directory that made it.
 */
async function planJsonOf(file: string, dir: string): Promise<unknown> {
  let bytes: Buffer;
  try {
    bytes = fs.readFileSync(file);
  } catch (e) {
    throw new UsageError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  const text = bytes.toString('utf8').trimStart();
  if (text.startsWith('{')) {
    try {
      return parseJsonExact(text);
    } catch {
      throw new UsageError(`${file} is not JSON (give terraform show -json output or a plan file)`);
    }
  }
  const shown = await runTerraform(['show', '-json', path.resolve(file)], { cwd: dir });
  if (shown.code !== 0) {
    throw new DomainError(
      'TERRAFORM.FAILED',
      `${terraformBinary()} show -json ${file} failed in ${dir}: ${shown.output.trim().split('\n').pop() ?? ''}`,
    );
  }
  try {
    return parseJsonExact(shown.stdout);
  } catch {
    throw new DomainError('TERRAFORM.FAILED', `${terraformBinary()} show -json printed no JSON`);
  }
}
