import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, getJson } from './api';
import { feed, FeedStatus, SHOWN_TYPES } from './live';

/** How often a page asks again while the event feed is down and the tab is visible. */
export const POLL_MS = 5000;
/** Events come in bursts (a lock, a version, an unlock): one read per burst. */
const DEBOUNCE_MS = 250;

export interface Loaded<T> {
  data: T | null;
  error: ApiError | null;
  loading: boolean;
  reload: () => void;
}

/**
 * GETs `path` (null: nothing to load) and keeps the last answer while asking
 * again. It asks again when the event feed (live.ts) brings one of the event
 * types in `live` (false: never), a burst of them once; while the feed is
 * down, every POLL_MS instead. Nothing is asked while the tab is hidden: a
 * change seen then is read when the tab shows again. With `keep`, the answer
 * for the previous path stays shown until the new one arrives (another page
 * of the same list, not another list).
 */
export function useApi<T>(
  path: string | null,
  live: readonly string[] | false = SHOWN_TYPES,
  keep = false,
): Loaded<T> {
  const [state, setState] = useState<{
    data: T | null;
    error: ApiError | null;
    loading: boolean;
    path: string | null;
  }>({ data: null, error: null, loading: path !== null, path });
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const feedStatus = useFeedStatus();
  const types = live === false ? '' : live.join(',');
  // The first request starts as the page first renders, not after the browser has painted
  // it (when effects run): opening a page waits for its data, so that time counts.
  const first = useRef<{ path: string; answer: Promise<T> } | null | undefined>(undefined);
  if (first.current === undefined) {
    const answer = path === null ? null : getJson<T>(path);
    // Handled by the effect; this keeps the browser from reporting it unhandled meanwhile.
    answer?.catch(() => undefined);
    first.current = answer && path !== null ? { path, answer } : null;
  }

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
    const early = first.current?.path === path ? first.current.answer : null;
    first.current = null;
    (early ?? getJson<T>(path)).then(
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

  const polling = feedStatus.kind === 'offline';
  useEffect(() => {
    if (types === '' || path === null) return;
    const wanted = new Set(types.split(','));
    let timer: ReturnType<typeof setTimeout> | undefined;
    let missed = false;
    const again = () => {
      if (document.visibilityState === 'visible') setTick((t) => t + 1);
      else missed = true;
    };
    const onVisible = () => {
      if (document.visibilityState === 'visible' && missed) {
        missed = false;
        setTick((t) => t + 1);
      }
    };
    addEventListener('visibilitychange', onVisible);
    const stopFeed = feed.onEvent((event) => {
      if (event !== null && !wanted.has(event.type)) return;
      clearTimeout(timer);
      timer = setTimeout(again, DEBOUNCE_MS);
    });
    const poll = polling ? setInterval(again, POLL_MS) : undefined;
    return () => {
      stopFeed();
      clearTimeout(timer);
      clearInterval(poll);
      removeEventListener('visibilitychange', onVisible);
    };
  }, [path, types, polling]);

  const same = state.path === path;
  const fresh = same || (keep && state.data !== null && path !== null);
  return {
    data: fresh ? state.data : null,
    error: fresh ? state.error : null,
    // Kept data answers another path: loading from the render that changed it, before the
    // effect that asks has run.
    loading: same ? state.loading : path !== null,
    reload,
  };
}

/** The event feed's status, for the indicator and for choosing between it and polling. */
export function useFeedStatus(): FeedStatus {
  const [status, setStatus] = useState<FeedStatus>(feed.current());
  useEffect(() => feed.onStatus(setStatus), []);
  return status;
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
