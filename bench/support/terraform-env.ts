/**
 * The environment a bench runs terraform in: the CLI configuration file
 * `rc` (never the user's), no checkpoint call, no prompt.
 */
export function terraformEnv(rc: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    TF_CLI_CONFIG_FILE: rc,
    CHECKPOINT_DISABLE: '1',
    TF_IN_AUTOMATION: '1',
    TF_INPUT: '0',
  };
}
