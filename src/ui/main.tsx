import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { hasToken, onTokenWanted, setToken } from './api';
import { href, POLL_MS, useFeedStatus, useRoute } from './hooks';
import { feed } from './live';
import { DriftPage } from './pages/drift';
import { InstancePage } from './pages/instance';
import { QueryPage } from './pages/query';
import { ResourcesPage } from './pages/resources';
import { RunsPage } from './pages/runs';
import { StatePage } from './pages/state';
import { StatesPage } from './pages/states';
import './app.css';

const NAV = [
  ['states', 'States'],
  ['resources', 'Resources'],
  ['drift', 'Drift'],
  ['runs', 'Runs & locks'],
  ['query', 'Query'],
] as const;

function App() {
  const route = useRoute();
  const [page, ...rest] = route.path;
  const name = rest.join('/');
  const section =
    page === 'state' ? 'states' : page === 'instance' ? 'resources' : (page ?? 'states');
  // The feed carries the events of the state a page is about, or of every state.
  const about =
    page === 'state' || page === 'resources' || page === 'instance'
      ? name || null
      : page === 'drift'
        ? route.params.get('state') || null
        : null;
  useEffect(() => feed.follow(about), [about]);
  const main = useRef<HTMLElement>(null);
  const first = useRef(true);
  // Moving to another page moves focus to its content, so keyboard users start there.
  useEffect(() => {
    if (first.current) first.current = false;
    else main.current?.focus({ preventScroll: true });
  }, [page, name]);

  return (
    <>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), main.current?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={href(['states'])}>
          Kilolock
        </a>
        <nav aria-label="Sections">
          {NAV.map(([id, label]) => (
            <a key={id} href={href([id])} aria-current={section === id ? 'page' : undefined}>
              {label}
            </a>
          ))}
        </nav>
        <LiveIndicator />
        <TokenButton />
      </header>
      <main id="main" ref={main} tabIndex={-1}>
        {page === 'state' && name ? (
          <StatePage name={name} route={route} />
        ) : page === 'resources' ? (
          <ResourcesPage name={name} route={route} />
        ) : page === 'instance' && name ? (
          <InstancePage name={name} address={route.params.get('address') ?? ''} />
        ) : page === 'drift' ? (
          <DriftPage route={route} />
        ) : page === 'runs' ? (
          <RunsPage />
        ) : page === 'query' ? (
          <QueryPage />
        ) : (
          <StatesPage route={route} />
        )}
      </main>
      <TokenDialog />
    </>
  );
}

/** Whether the pages follow the event feed or poll, and why they poll. */
function LiveIndicator() {
  const status = useFeedStatus();
  const [text, title] =
    status.kind === 'live'
      ? ['Live', 'Pages update as kld records changes (event feed).']
      : status.kind === 'connecting'
        ? ['Connecting…', 'Connecting to the event feed.']
        : [
            'Offline',
            `No event feed (${status.reason}): pages ask again every ${POLL_MS / 1000} s.`,
          ];
  return (
    <span class={`live ${status.kind}`} role="status" title={title}>
      <span aria-hidden="true">● </span>
      {text}
      <span class="sr-only">: {title}</span>
    </span>
  );
}

function TokenButton() {
  const [set, setSet] = useState(hasToken());
  if (!set) return null;
  return (
    <button
      type="button"
      class="link"
      onClick={() => {
        setToken(null);
        setSet(false);
        location.reload();
      }}
    >
      Forget token
    </button>
  );
}

/** Asks for a token when kld answers 401; kept in this tab's session only. */
function TokenDialog() {
  const dialog = useRef<HTMLDialogElement>(null);
  const input = useRef<HTMLInputElement>(null);
  useEffect(
    () =>
      onTokenWanted(() => {
        if (dialog.current && !dialog.current.open) dialog.current.showModal();
      }),
    [],
  );
  return (
    <dialog ref={dialog} class="token" aria-labelledby="token-title">
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          const value = input.current?.value.trim();
          if (!value) return;
          setToken(value);
          dialog.current?.close();
          location.reload();
        }}
      >
        <h2 id="token-title">kld wants a token</h2>
        <p>
          Paste an API token. It is kept in this browser tab only (session storage) and sent as{' '}
          <code>Authorization: Bearer</code>.
        </p>
        <label>
          Token <input ref={input} type="password" autoComplete="off" required />
        </label>
        <div class="actions">
          <button type="button" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
          <button type="submit" class="primary">
            Use token
          </button>
        </div>
      </form>
    </dialog>
  );
}

const root = document.getElementById('app')!;
root.replaceChildren();
render(<App />, root);
