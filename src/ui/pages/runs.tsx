import { useRef, useState } from 'preact/hooks';
import { ApiError, postJson, stateApi } from '../api';
import { ago, duration, Empty, Failure, Guard, When } from '../components';
import { href, useApi } from '../hooks';
import type { Lock, RefreshRun } from '../types';
import { ApplyRuns, Reservations } from './apply';

export function RunsPage() {
  const locks = useApi<{ locks: Lock[] }>('/v1/api/locks');
  const runs = useApi<{ runs: RefreshRun[] }>('/v1/refresh-runs?limit=100');
  const [released, setReleased] = useState<string | null>(null);
  return (
    <section aria-labelledby="runs-title">
      <h1 id="runs-title">Runs &amp; locks</h1>
      <h2>Locks</h2>
      {released && (
        <p class="status ok" role="status">
          {released}
        </p>
      )}
      <Guard loaded={locks} what="locks">
        {({ locks: list }) =>
          list.length === 0 ? (
            <Empty>No state is locked.</Empty>
          ) : (
            <LockTable
              locks={list}
              onReleased={(message) => {
                setReleased(message);
                locks.reload();
              }}
            />
          )
        }
      </Guard>
      <h2>Apply runs</h2>
      <ApplyRuns />
      <h2>Reservations of apply runs</h2>
      <Reservations />
      <h2>Refresh runs</h2>
      <Guard loaded={runs} what="refresh runs">
        {({ runs: list }) =>
          list.length === 0 ? (
            <Empty>
              No refresh run yet: <code>kl refresh &lt;state&gt;</code> starts one.
            </Empty>
          ) : (
            <div class="table-wrap">
              <table>
                <caption class="sr-only">Refresh runs, newest first</caption>
                <thead>
                  <tr>
                    <th scope="col">Run</th>
                    <th scope="col">State</th>
                    <th scope="col">Status</th>
                    <th scope="col" class="num">
                      Checked
                    </th>
                    <th scope="col" class="num">
                      Changed
                    </th>
                    <th scope="col" class="num">
                      Failed
                    </th>
                    <th scope="col">Versions</th>
                    <th scope="col">Started</th>
                    <th scope="col">Took</th>
                    <th scope="col">By</th>
                  </tr>
                </thead>
                <tbody>
                  {list.map((r) => (
                    <tr key={r.run_id}>
                      <td data-label="Run">
                        <code title={r.run_id}>{r.run_id.slice(0, 8)}</code>
                        {r.dry_run && <span class="badge"> dry run</span>}
                      </td>
                      <td data-label="State">
                        <a href={href(['state', r.state_name])}>{r.state_name}</a>
                      </td>
                      <td data-label="Status">
                        <span
                          class={`badge ${r.status === 'succeeded' ? 'good' : r.status === 'running' ? '' : 'bad'}`}
                        >
                          {r.status}
                        </span>
                        {r.error_summary && <span class="muted"> {r.error_summary}</span>}
                      </td>
                      <td data-label="Checked" class="num">
                        {r.checked}
                      </td>
                      <td data-label="Changed" class="num">
                        {r.changed}
                      </td>
                      <td data-label="Failed" class="num">
                        {r.failed}
                      </td>
                      <td data-label="Versions">
                        v{r.from_version} →{' '}
                        {r.to_version === null ? (
                          <span class="muted">no commit</span>
                        ) : (
                          `v${r.to_version}`
                        )}
                      </td>
                      <td data-label="Started">
                        <When at={r.started_at} />
                      </td>
                      <td data-label="Took">
                        {r.finished_at ? duration(r.started_at, r.finished_at) : 'running'}
                      </td>
                      <td data-label="By">{r.actor}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Guard>
      <p class="muted">
        Apply runs and reservations appear here once kld records them (parallel applies are not in
        this kld yet).
      </p>
    </section>
  );
}

function LockTable({
  locks,
  onReleased,
}: {
  locks: Lock[];
  onReleased: (message: string) => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [target, setTarget] = useState<Lock | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const ask = (lock: Lock) => {
    setTarget(lock);
    setError(null);
    dialog.current?.showModal();
  };
  const release = async () => {
    if (!target) return;
    setBusy(true);
    setError(null);
    try {
      // Only the lock shown is released: if another took its place meanwhile, kld answers 409.
      const answer = await postJson<{ released: string | null }>(
        stateApi(target.name, '/force-unlock'),
        {
          lock_id: target.lockId,
        },
      );
      dialog.current?.close();
      onReleased(
        answer.released
          ? `Released lock ${answer.released} on ${target.name}.`
          : `${target.name} was not locked any more.`,
      );
    } catch (err) {
      setError(err as ApiError);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <div class="table-wrap">
        <table>
          <caption class="sr-only">Locks held now</caption>
          <thead>
            <tr>
              <th scope="col">State</th>
              <th scope="col">Held by</th>
              <th scope="col">Operation</th>
              <th scope="col">Age</th>
              <th scope="col">Lock ID</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {locks.map((l) => (
              <tr key={`${l.name} ${l.lockId}`}>
                <td data-label="State">
                  <a href={href(['state', l.name])}>{l.name}</a>
                </td>
                <td data-label="Held by">
                  {l.who ?? '—'} <span class="muted">({l.acquiredBy})</span>
                </td>
                <td data-label="Operation">
                  {l.operation ?? '—'}
                  {l.mode === 'read' && <span class="muted"> (shared with other plans)</span>}
                </td>
                <td data-label="Age">
                  <When at={l.acquiredAt} />
                </td>
                <td data-label="Lock ID">
                  <code>{l.lockId}</code>
                </td>
                <td>
                  <button type="button" class="danger" onClick={() => ask(l)}>
                    Force unlock…
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <dialog ref={dialog} aria-labelledby="unlock-title" onClose={() => setTarget(null)}>
        {target && (
          <form
            method="dialog"
            onSubmit={(e) => {
              e.preventDefault();
              void release();
            }}
          >
            <h2 id="unlock-title">Force-unlock {target.name}?</h2>
            <p>
              {target.who ?? target.acquiredBy} has held it for{' '}
              {ago(new Date(target.acquiredAt)).replace(' ago', '')}
              {target.operation && <> ({target.operation})</>}. If that run is still going,
              releasing its lock lets another run write the state at the same time.
            </p>
            <p>
              Lock ID <code>{target.lockId}</code>
            </p>
            {error && <Failure error={error} />}
            <div class="actions">
              <button type="button" onClick={() => dialog.current?.close()} autoFocus>
                Cancel
              </button>
              <button type="submit" class="danger" disabled={busy}>
                Release this lock
              </button>
            </div>
          </form>
        )}
      </dialog>
    </>
  );
}
