import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, getJson } from './api';

/** How often a page asks again while it is visible (live updates until kld has an event feed). */
export const POLL_MS = 5000;

export interface Loaded<T> {
  data: T | null;
  error: ApiError | null;
  loading: boolean;
  reload: () => void;
}

/**
 * GETs `path` (null: nothing to load), keeps the last answer while asking
 * again, and asks again every POLL_MS while the tab is visible. With
 * `keep`, the answer for the previous path stays shown until the new one
 * arrives (another page of the same list, not another list).
 */
export function useApi<T>(path: string | null, poll = true, keep = false): Loaded<T> {
  const [state, setState] = useState<{
    data: T | null;
    error: ApiError | null;
    loading: boolean;
    path: string | null;
  }>({ data: null, error: null, loading: path !== null, path });
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const current = useRef(path);
  current.current = path;

  useEffect(() => {
    if (path === null) {
      setState({ data: null, error: null, loading: false, path });
      return;
    }
    let cancelled = false;
    setState((s) =>
      s.path === path || keep
        ? { ...s, loading: true }
        : { data: null, error: null, loading: true, path },
    );
    getJson<T>(path).then(
      (data) => !cancelled && setState({ data, error: null, loading: false, path }),
      (error: unknown) =>
        !cancelled &&
        setState((s) => ({
          data: s.path === path ? s.data : null,
          error: error instanceof ApiError ? error : new ApiError(0, 'CLIENT', String(error)),
          loading: false,
          path,
        })),
    );
    return () => {
      cancelled = true;
    };
  }, [path, tick, keep]);

  useEffect(() => {
    if (!poll || path === null) return;
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') setTick((t) => t + 1);
    }, POLL_MS);
    return () => clearInterval(timer);
  }, [path, poll]);

  const fresh = state.path === path || (keep && state.data !== null && path !== null);
  return {
    data: fresh ? state.data : null,
    error: fresh ? state.error : null,
    loading: fresh ? state.loading : path !== null,
    reload,
  };
}

export interface Route {
  /** Path segments after `#/`, decoded. */
  path: string[];
  params: URLSearchParams;
}

function parseHash(): Route {
  const hash = location.hash.replace(/^#\/?/, '');
  const [p, q = ''] = hash.split('?', 2);
  return {
    path: p
      .split('/')
      .filter(Boolean)
      .map((s) => decodeURIComponent(s)),
    params: new URLSearchParams(q),
  };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(parseHash);
  useEffect(() => {
    const onChange = () => setRoute(parseHash());
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

/** `#/a/b?x=1`, segments encoded one by one (state names keep their slashes). */
export function href(
  path: string[],
  params: Record<string, string | number | undefined> = {},
): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return `#/${path.map((p) => p.split('/').map(encodeURIComponent).join('/')).join('/')}${s ? `?${s}` : ''}`;
}

/** Replaces the hash's query without a new history entry per keystroke. */
export function replaceParams(
  route: Route,
  params: Record<string, string | number | undefined>,
): void {
  const merged: Record<string, string | number | undefined> = Object.fromEntries(route.params);
  Object.assign(merged, params);
  history.replaceState(null, '', href(route.path, merged));
  dispatchEvent(new HashChangeEvent('hashchange'));
}
