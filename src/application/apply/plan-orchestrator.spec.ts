import { StateDocumentV4 } from '../../domain/terraform';
import { ApplyServerPort } from './apply-server.port';
import { PlanOrchestrator, PlanRequest } from './plan-orchestrator';
import {
  ApplyResult,
  ConfigReader,
  ModuleSource,
  TerraformWorkspace,
  TerraformWorkspaces,
} from './terraform-workspace.port';

const trunk: StateDocumentV4 = {
  version: 4,
  terraform_version: '1.11.4',
  serial: 3,
  lineage: 'L',
  outputs: {},
  resources: [],
};

const server = {
  trunk: async () => ({ document: trunk, version: 7 }),
} as unknown as ApplyServerPort;

/** terraform's plan, answered when the test says so; a fresh init may happen meanwhile. */
class FakeWorkspace implements TerraformWorkspace {
  readonly dir = '/kl/tree';
  initialisations = 0;
  disposed = false;
  modules = new Map([['', '/kl/tree']]);
  private answer!: () => void;
  readonly planning = new Promise<void>((resolve) => (this.answer = resolve));
  freshInitDuringPlan: Map<string, string> | null = null;

  async init() {}
  async plan(): Promise<unknown> {
    await this.planning;
    if (this.freshInitDuringPlan) {
      this.initialisations++;
      this.modules = this.freshInitDuringPlan;
    }
    return { format_version: '1.2', terraform_version: '1.11.4', resource_changes: [] };
  }
  finishPlan() {
    this.answer();
  }
  async apply(): Promise<ApplyResult> {
    throw new Error('not in a plan');
  }
  async stateText() {
    return null;
  }
  async moduleDirs() {
    return new Map(this.modules);
  }
  async dispose() {
    this.disposed = true;
  }
}

/** Records which directories were read, and when. */
class RecordingReader implements ConfigReader {
  reads: string[] = [];
  async readModule(dir: string): Promise<ModuleSource> {
    this.reads.push(dir);
    return { hcl: [], json: new Map() };
  }
}

const request: PlanRequest = {
  server: 'http://kld',
  state: 's',
  configDir: '/user/config',
  files: null,
  targets: [],
  refresh: false,
  protocol: 'http',
};

async function planWith(workspace: FakeWorkspace, reader: RecordingReader) {
  const workspaces: TerraformWorkspaces = { open: async () => workspace };
  const orchestrator = new PlanOrchestrator(server, reader, workspaces, { now: () => new Date() });
  const planning = orchestrator.plan(request);
  // Everything kl does while terraform runs has happened before terraform answers.
  await new Promise((resolve) => setTimeout(resolve, 10));
  const readWhileRunning = [...reader.reads];
  workspace.finishPlan();
  const outcome = await planning;
  await outcome.cleanup;
  return { outcome, readWhileRunning };
}

describe('PlanOrchestrator: the modules’ locals', () => {
  it('are read while terraform runs, and not again after it', async () => {
    const workspace = new FakeWorkspace();
    workspace.modules.set('net', '/kl/tree/modules/net');
    const reader = new RecordingReader();
    const { outcome, readWhileRunning } = await planWith(workspace, reader);
    expect(readWhileRunning).toEqual(['/user/config', '/kl/tree', '/kl/tree/modules/net']);
    expect(reader.reads).toEqual(readWhileRunning);
    expect(outcome.plan.summary).toBe('No changes.');
    expect(workspace.disposed).toBe(true);
  });

  it('are read again from what a fresh terraform init installed during the plan', async () => {
    const workspace = new FakeWorkspace();
    workspace.modules.set('net', '/kl/tree/modules/net');
    workspace.freshInitDuringPlan = new Map([
      ['', '/kl/tree'],
      ['net', '/kl/tree/.terraform/modules/net'],
    ]);
    const reader = new RecordingReader();
    const { readWhileRunning } = await planWith(workspace, reader);
    expect(reader.reads.slice(readWhileRunning.length)).toEqual([
      '/kl/tree',
      '/kl/tree/.terraform/modules/net',
    ]);
    expect(workspace.disposed).toBe(true);
  });
});
