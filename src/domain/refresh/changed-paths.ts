/**
 * Refresh names what drifted with the same path rendering the resource read
 * model uses, so `kl refresh`, `refresh_results.changed_paths` and the
 * resource history API agree on `versioning_configuration[0].status`. One
 * implementation lives with the state document model; this is the refresh
 * slice's entry point to it.
 */
export { changedPaths } from '../terraform/changed-paths';
