import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { FIXTURE_DIR } from '../../domain/apply/__fixtures__/fixtures';
import { scopeConfiguration, withoutBackend } from '../../domain/apply/config-scope';
import { DomainError } from '../../domain/shared/domain-error';
import { CONFIG_INVALID, HclConfigReader, parseHcl } from './hcl-reader';

const reader = new HclConfigReader();

describe('HclConfigReader', () => {
  it('reads blocks, locals one by one, and the references they make', async () => {
    const { hcl, json } = await reader.readModule(FIXTURE_DIR);
    expect(json.size).toBe(0);
    expect(hcl.map((f) => f.name)).toEqual(['main.tf', 'slow_a.tf', 'slow_b.tf']);
    const main = hcl[0];
    const byKey = new Map(main.units.map((u) => [u.key, u]));
    expect(byKey.get('local.marker')?.references).toEqual(['terraform_data.marker.output']);
    expect(byKey.get('local.prefix')?.references).toEqual(['var.env']);
    expect(byKey.get('module.web')?.references).toEqual([
      'module.network.subnet_id',
      'var.web_image',
    ]);
    expect(byKey.get('terraform_data.new')?.references).toEqual(['var.with_new', 'local.marker']);
    expect(
      main.text.slice(byKey.get('var.env')!.range.start, byKey.get('var.env')!.range.end),
    ).toBe('variable "env" {\n  type    = string\n  default = "demo"\n}');
  });

  it('names the file and line of HCL it cannot parse', async () => {
    await expect(parseHcl('broken.tf', 'resource "a" "b" {\n  x = \n}\n')).rejects.toThrow(
      /^broken\.tf:\d+: not valid HCL/,
    );
    await expect(parseHcl('broken.tf', 'resource "a" "b" {')).rejects.toMatchObject({
      code: CONFIG_INVALID,
    });
  });

  it('refuses a directory it cannot read, naming it', async () => {
    const missing = path.join(os.tmpdir(), 'kl-no-such-dir-xyz');
    await expect(reader.readModule(missing)).rejects.toThrow(
      `cannot read the configuration directory ${missing}`,
    );
  });
});

describe('scopeConfiguration on the fixture', () => {
  let files: Awaited<ReturnType<HclConfigReader['readModule']>>['hcl'];
  beforeAll(async () => {
    files = (await reader.readModule(FIXTURE_DIR)).hcl;
  });

  it('keeps the selected file whole and copies only the support it needs', () => {
    const scoped = scopeConfiguration(files, ['slow_a.tf']);
    expect(scoped.footprint).toEqual(['terraform_data.slow_a']);
    expect(scoped.files.map((f) => f.name)).toEqual(['main.tf', 'slow_a.tf']);
    const slowA = scoped.files.find((f) => f.name === 'slow_a.tf')!;
    expect(slowA.text).toBe(fs.readFileSync(path.join(FIXTURE_DIR, 'slow_a.tf'), 'utf8'));
    const support = scoped.files.find((f) => f.name === 'main.tf')!.text;
    expect(support).toContain('variable "env"');
    expect(support).toMatch(/locals \{\n {2}prefix = "kl-\$\{var.env\}"\n\}/);
    // Nothing slow_a does not need: no marker local, no modules, no other outputs.
    expect(support).not.toContain('marker');
    expect(support).not.toContain('module "');
    expect(support).not.toContain('web_url');
    expect(support).not.toContain('variable "web_image"');
  });

  it('follows references transitively and declares every module and resource it keeps', () => {
    const scoped = scopeConfiguration(files, ['main.tf']);
    expect(scoped.footprint).toEqual([
      'module.db',
      'module.network',
      'module.web',
      'terraform_data.marker',
      'terraform_data.new',
      'terraform_data.old',
    ]);
    // slow_a.tf's output reads only slow_a, which main.tf does not declare.
    expect(scoped.files.map((f) => f.name)).toEqual(['main.tf']);
  });

  it('brings outputs and moves from other files along when they follow what the selected files declare', async () => {
    const extra = await parseHcl(
      'outputs.tf',
      'output "a" {\n  value = terraform_data.slow_a.output\n}\n\noutput "b" {\n  value = terraform_data.slow_b.output\n}\n\nmoved {\n  from = terraform_data.slow_x\n  to   = terraform_data.slow_a\n}\n',
    );
    const scoped = scopeConfiguration([...files, extra], ['slow_a.tf']);
    const outputs = scoped.files.find((f) => f.name === 'outputs.tf')!.text;
    expect(outputs).toContain('output "a"');
    expect(outputs).toContain('moved {');
    expect(outputs).not.toContain('output "b"');
  });

  it('keeps the providers its resources use, and leaves out the others and every backend', async () => {
    const cfg = await parseHcl(
      'providers.tf',
      [
        'terraform {',
        '  required_version = ">= 1.5"',
        '  backend "http" {',
        '    address = "http://127.0.0.1:8080/v1/states/x"',
        '  }',
        '}',
        'provider "aws" {',
        '  region = var.region',
        '}',
        'provider "aws" {',
        '  alias  = "west"',
        '  region = "us-west-2"',
        '}',
        'provider "google" {}',
        'variable "region" {}',
        '',
      ].join('\n'),
    );
    const bucket = await parseHcl(
      'bucket.tf',
      'resource "aws_s3_bucket" "b" {\n  bucket = "x"\n}\n',
    );
    const scoped = scopeConfiguration([cfg, bucket], ['bucket.tf']);
    const text = scoped.files.find((f) => f.name === 'providers.tf')!.text;
    expect(text).toContain('required_version = ">= 1.5"');
    expect(text).not.toContain('backend');
    expect(text).toContain('alias  = "west"');
    expect(text).toContain('variable "region"');
    expect(text).not.toContain('google');
    expect(withoutBackend(cfg)).not.toContain('backend "http"');
    expect(withoutBackend(cfg)).toContain('provider "google"');
  });

  it('refuses a file that is not in the directory', () => {
    expect(() => scopeConfiguration(files, ['nope.tf'])).toThrow(DomainError);
    expect(() => scopeConfiguration(files, ['nope.tf'])).toThrow('-f nope.tf: no such .tf file');
  });
});
