import { envAllowPolicy } from './env-allow-list';

describe('envAllowPolicy (KL_REFRESH_ENV_ALLOW)', () => {
  it('allows nothing when unset', () => {
    const policy = envAllowPolicy([]);
    expect(policy.refusal('AWS_ACCESS_KEY_ID')).toMatch(/lists in KL_REFRESH_ENV_ALLOW/);
  });

  it('allows exactly the names its globs match', () => {
    const policy = envAllowPolicy(['AWS_*', 'ARM_CLIENT_ID', 'TOKEN_?']);
    expect(policy.refusal('AWS_SECRET_ACCESS_KEY')).toBeNull();
    expect(policy.refusal('ARM_CLIENT_ID')).toBeNull();
    expect(policy.refusal('TOKEN_A')).toBeNull();
    expect(policy.refusal('ARM_CLIENT_SECRET')).not.toBeNull();
    expect(policy.refusal('TOKEN_AB')).not.toBeNull();
    expect(policy.refusal('MY_AWS_KEY')).not.toBeNull();
  });

  it("never allows kld's own KL_* settings, not even to a catch-all glob", () => {
    const policy = envAllowPolicy(['*']);
    expect(policy.refusal('HOME')).toBeNull();
    expect(policy.refusal('KL_DATABASE_URL')).toBe(
      "kld's own KL_* settings are never given to a provider",
    );
  });

  it('does not disclose the configured globs in a refusal', () => {
    expect(envAllowPolicy(['SECRET_PREFIX_*']).refusal('OTHER')).not.toContain('SECRET_PREFIX');
  });
});
