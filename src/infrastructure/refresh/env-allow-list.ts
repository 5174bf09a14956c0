import picomatch from 'picomatch';
import type { EnvPolicy } from '../../application/refresh/provider-config';

/**
 * The `{"env": …}` names a refresh running inside kld may resolve:
 * KL_REFRESH_ENV_ALLOW's globs, and never kld's own KL_* settings (the
 * database URL carries a password), whatever the globs say. A refusal does
 * not list the globs: the caller may be the one probing them.
 */
export function envAllowPolicy(globs: readonly string[]): EnvPolicy {
  const matches = globs.length ? picomatch([...globs]) : () => false;
  return {
    refusal(name) {
      if (name.startsWith('KL_')) {
        return "kld's own KL_* settings are never given to a provider";
      }
      if (matches(name)) return null;
      return (
        'a server-side refresh reads only the variables the operator lists in KL_REFRESH_ENV_ALLOW ' +
        '(comma-separated names or globs); add it there, or run kl refresh where the credentials live'
      );
    },
  };
}
