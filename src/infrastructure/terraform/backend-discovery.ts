import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { DomainError } from '../../domain/shared/domain-error';

export const BACKEND_UNKNOWN = 'PLAN.BACKEND_UNKNOWN';

export interface HttpBackendTarget {
  /** kld's base URL, e.g. http://127.0.0.1:8080 (never with credentials). */
  server: string;
  state: string;
}

const STATES_PATH = '/v1/states/';

/**
 * Reads the state address a directory's `backend "http"` points at, as
 * `terraform init` recorded it in `.terraform/terraform.tfstate` (or under
 * TF_DATA_DIR): kld's URL and the state name. null when the directory was
 * never initialised; an error when it uses another backend or the address
 * is not a kld state address.
 */
export async function discoverHttpBackend(configDir: string): Promise<HttpBackendTarget | null> {
  const dataDir = path.resolve(configDir, process.env.TF_DATA_DIR || '.terraform');
  let raw: string;
  try {
    raw = await fs.readFile(path.join(dataDir, 'terraform.tfstate'), 'utf8');
  } catch {
    return null;
  }
  let recorded: { backend?: { type?: unknown; config?: { address?: unknown } } };
  try {
    recorded = JSON.parse(raw) as typeof recorded;
  } catch {
    throw new DomainError(
      BACKEND_UNKNOWN,
      `${path.join(dataDir, 'terraform.tfstate')} is not JSON`,
    );
  }
  const type = recorded.backend?.type;
  if (type === undefined) return null;
  if (type !== 'http') {
    throw new DomainError(
      BACKEND_UNKNOWN,
      `${configDir} uses the "${String(type)}" backend, not kld's "http" backend: pass --state and --server`,
    );
  }
  const address = recorded.backend?.config?.address;
  if (typeof address !== 'string') {
    throw new DomainError(BACKEND_UNKNOWN, `the "http" backend of ${configDir} records no address`);
  }
  return parseStateAddress(address);
}

/** `http://host:8080/v1/states/team/app` → server `http://host:8080`, state `team/app`. */
export function parseStateAddress(address: string): HttpBackendTarget {
  let url: URL;
  try {
    url = new URL(address);
  } catch {
    throw new DomainError(BACKEND_UNKNOWN, 'the "http" backend address is not a URL');
  }
  const at = url.pathname.indexOf(STATES_PATH);
  if (at < 0 || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new DomainError(
      BACKEND_UNKNOWN,
      `the "http" backend address ${url.origin}${url.pathname} is not a kld state address (…/v1/states/<name>)`,
    );
  }
  const state = url.pathname
    .slice(at + STATES_PATH.length)
    .split('/')
    .map((s) => decodeURIComponent(s))
    .join('/');
  if (state === '')
    throw new DomainError(BACKEND_UNKNOWN, 'the "http" backend address names no state');
  return { server: `${url.origin}${url.pathname.slice(0, at)}`, state };
}
