import * as fs from 'node:fs';
import * as path from 'node:path';
import { httpBackend, mustRun } from './refresh-processes';

/**
 * The kltest scenario of the refresh bench: N `kltest_item` instances of the
 * repo's TypeScript test provider (protocol 6), stored in kld.
 *
 * Applying 5,000 instances with terraform takes minutes (terraform core is
 * superlinear in instance count, see the shared terraform notes, section 3),
 * so the state is generated instead, from a template terraform itself wrote:
 *
 *   1. `terraform apply -var n=2` through kld's http backend: two real
 *      instances, their object files, a state terraform wrote;
 *   2. N copies of the first instance, each with its own id, `name` and
 *      `index_key` (exactly what `count = N` with `name = "item-${count.index}"`
 *      applies), and for each an object file: the template's file with the id
 *      and name replaced (the provider's "remote API" is one JSON file per
 *      object, see test/support/provider/object-store.ts);
 *   3. the template's two object files removed, and the document POSTed to
 *      kld as the next serial of the same lineage, as terraform's backend would.
 *
 * The result is what `terraform apply` of `count = N` would have left: a
 * refresh of it finds no drift (the bench prints the changed counts, and
 * terraform's -refresh-only plan exit code, as the check).
 */

export interface KltestWorkspace {
  dir: string;
  objectsDir: string;
  env: NodeJS.ProcessEnv;
  templateApplyMs: number;
  generateMs: number;
  pushMs: number;
  stateBytes: number;
}

interface StateDoc {
  serial: number;
  lineage: string;
  resources: {
    mode: string;
    type: string;
    name: string;
    instances: { index_key?: number; attributes: Record<string, unknown> }[];
  }[];
}

/**
 * A filesystem mirror holding the kltest provider: an executable that runs
 * the compiled provider in dist/ (the same code the e2e tests run through
 * swc, without compiling it on every launch).
 */
export function kltestMirror(root: string, repoRoot: string): string {
  const main = path.join(repoRoot, 'dist/test/support/provider/main.js');
  if (!fs.existsSync(main)) throw new Error(`${main} is missing: run npm run build first`);
  const mirror = path.join(root, 'mirror-kltest');
  const platform = path.join(mirror, 'registry.terraform.io/kilolock/kltest/0.1.0/linux_amd64');
  fs.mkdirSync(platform, { recursive: true });
  const binary = path.join(platform, 'terraform-provider-kltest_v0.1.0');
  fs.writeFileSync(binary, `#!/usr/bin/env node\nrequire(${JSON.stringify(main)});\n`, {
    mode: 0o755,
  });
  return mirror;
}

export async function prepareKltest(options: {
  root: string;
  kldUrl: string;
  state: string;
  instances: number;
  baseEnv: NodeJS.ProcessEnv;
  cliConfig: string;
}): Promise<KltestWorkspace> {
  const { root, kldUrl, state, instances } = options;
  const dir = path.join(root, 'tf-kltest');
  const objectsDir = path.join(root, 'kltest-objects');
  fs.mkdirSync(dir, { recursive: true });
  fs.mkdirSync(objectsDir, { recursive: true });
  const env: NodeJS.ProcessEnv = {
    ...options.baseEnv,
    TF_CLI_CONFIG_FILE: options.cliConfig,
    // kl refresh resolves the stored {"env": "KLTEST_OBJECTS"} reference from this.
    KLTEST_OBJECTS: objectsDir,
  };
  fs.writeFileSync(
    path.join(dir, 'main.tf'),
    `terraform {
  required_providers {
    kltest = { source = "kilolock/kltest", version = "0.1.0" }
  }
${httpBackend(kldUrl, state)}}

provider "kltest" {
  state_dir = ${JSON.stringify(objectsDir)}
}

variable "n" {
  type    = number
  default = ${instances}
}

resource "kltest_item" "x" {
  count = var.n
  name  = "item-\${count.index}"
}
`,
  );
  const tf = (args: string[]) =>
    mustRun(`terraform ${args[0]}`, 'terraform', [...args, '-input=false', '-no-color'], {
      cwd: dir,
      env,
      timeoutMs: 300_000,
    });
  await tf(['init']);
  const template = await tf(['apply', '-auto-approve', '-var', 'n=2']);

  const t0 = performance.now();
  const url = `${kldUrl}/v1/states/${state}`;
  const res = await fetch(url);
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status}`);
  const doc = (await res.json()) as StateDoc;
  const resource = doc.resources.find((r) => r.mode === 'managed' && r.type === 'kltest_item');
  if (!resource || resource.instances.length !== 2) {
    throw new Error('the template apply did not leave two kltest_item instances');
  }
  const [first] = resource.instances;
  const typeDir = path.join(objectsDir, 'kltest_item');
  const objectFile = (id: string) => path.join(typeDir, `${id}.json`);
  const templateObject = JSON.parse(
    fs.readFileSync(objectFile(String(first.attributes.id)), 'utf8'),
  ) as Record<string, unknown>;
  for (const inst of resource.instances) fs.rmSync(objectFile(String(inst.attributes.id)));

  resource.instances = [];
  for (let i = 0; i < instances; i++) {
    const id = `item-${i.toString(16).padStart(8, '0')}`;
    const name = `item-${i}`;
    resource.instances.push({
      ...first,
      index_key: i,
      attributes: { ...first.attributes, id, name },
    });
    fs.writeFileSync(
      objectFile(id),
      `${JSON.stringify({ ...templateObject, id, name }, null, 2)}\n`,
    );
  }
  doc.serial += 1;
  const body = JSON.stringify(doc);
  const generateMs = performance.now() - t0;

  const t1 = performance.now();
  const push = await fetch(url, {
    method: 'POST',
    body,
    headers: { 'Content-Type': 'application/json' },
  });
  if (push.status !== 200) throw new Error(`POST ${url}: ${push.status} ${await push.text()}`);
  return {
    dir,
    objectsDir,
    env,
    templateApplyMs: template.ms,
    generateMs,
    pushMs: performance.now() - t1,
    stateBytes: body.length,
  };
}
