/** One stream per run: results of one run never contend with another's. */
export function refreshStreamId(runId: string): string {
  return `refresh-${runId}`;
}

/**
 * Provider configs belong to a state *name*, like the state stream: a state
 * deleted and created again under the same name keeps its configs.
 */
export function providerConfigsStreamId(stateName: string): string {
  return `provider-configs-${stateName}`;
}
