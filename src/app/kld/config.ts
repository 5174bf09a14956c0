import { loadConfig } from '../../infrastructure/config/config';
import { describeConfig, effectiveEnvironment } from '../../infrastructure/config/config-file';

/** `kld config`: the effective configuration (URL passwords masked), validated as `kld serve` does. */
export function printConfig(configFile: string | undefined): void {
  const effective = effectiveEnvironment(process.env, configFile);
  loadConfig(effective.env);
  process.stdout.write(describeConfig(effective, configFile));
}
