import * as fs from 'node:fs';
import * as path from 'node:path';
import { writeMirrorCliConfig } from './terraform-aws';

/** The kltest plugin executable (compiles its TypeScript with swc on start, never stale). */
export const KLTEST_PROVIDER = path.resolve(__dirname, 'provider/terraform-provider-kltest');

export interface KltestMirror {
  /** A filesystem mirror holding kilolock/kltest 0.1.0 for linux_amd64. */
  mirror: string;
  /** A terraform CLI configuration that installs providers from `mirror` only. */
  cliConfig: string;
}

/**
 * The kltest provider in a filesystem mirror under `root`, and a terraformrc
 * installing from it, so terraform and `kl` find it offline.
 */
export function kltestMirror(root: string): KltestMirror {
  const mirror = path.join(root, 'mirror');
  const platformDir = path.join(mirror, 'registry.terraform.io/kilolock/kltest/0.1.0/linux_amd64');
  fs.mkdirSync(platformDir, { recursive: true });
  fs.symlinkSync(KLTEST_PROVIDER, path.join(platformDir, 'terraform-provider-kltest_v0.1.0'));
  const cliConfig = path.join(root, 'terraformrc');
  writeMirrorCliConfig(cliConfig, mirror);
  return { mirror, cliConfig };
}

/** This process's environment less anything that would steer terraform, kl or kltest. */
export function offlineTerraformEnv(): NodeJS.ProcessEnv {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith('TF_') && !k.startsWith('KL_') && !k.startsWith('KLTEST_'),
    ),
  );
  return { ...inherited, CHECKPOINT_DISABLE: '1', TF_IN_AUTOMATION: '1' };
}
