import type { ComponentChildren } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { ApiError, postJson, stateApi } from '../api';
import { ago, Column, duration, Empty, Failure, Guard, Table, When } from '../components';
import { href, useApi } from '../hooks';
import { APPLY_RUN_EVENTS, LOCK_EVENTS, REFRESH_EVENTS } from '../live';
import type { ApplyRun, Lock, RefreshRun, Reservation } from '../types';

export function RunsPage() {
  const locks = useApi<{ locks: Lock[] }>('/v1/api/locks', LOCK_EVENTS);
  const applyRuns = useApi<{ runs: ApplyRun[] }>('/v1/api/apply-runs?limit=100', APPLY_RUN_EVENTS);
  const reservations = useApi<{ reservations: Reservation[] }>(
    '/v1/api/reservations',
    APPLY_RUN_EVENTS,
  );
  const refreshRuns = useApi<{ runs: RefreshRun[] }>('/v1/refresh-runs?limit=100', REFRESH_EVENTS);
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
      <Guard loaded={applyRuns} what="apply runs">
        {({ runs }) =>
          runs.length === 0 ? (
            <Empty>
              No apply run yet: <code>kl apply</code> starts one.
            </Empty>
          ) : (
            <RunTable caption="Apply runs, newest first" rows={runs.map(applyRun)} />
          )
        }
      </Guard>
      <h2>Reservations of apply runs</h2>
      <Guard loaded={reservations} what="reservations">
        {({ reservations: all }) => {
          // Terraform's own locks are listed with the locks above.
          const held = all.filter((r) => r.kind === 'apply');
          return held.length === 0 ? (
            <Empty>No apply run holds a reservation.</Empty>
          ) : (
            <Table
              caption="Reservations held by apply runs"
              rows={held}
              rowKey={(r) => r.id}
              columns={RESERVATION_COLUMNS}
            />
          );
        }}
      </Guard>
      <h2>Refresh runs</h2>
      <Guard loaded={refreshRuns} what="refresh runs">
        {({ runs }) =>
          runs.length === 0 ? (
            <Empty>
              No refresh run yet: <code>kl refresh &lt;state&gt;</code> starts one.
            </Empty>
          ) : (
            <RunTable caption="Refresh runs, newest first" rows={runs.map(refreshRun)} />
          )
        }
      </Guard>
    </section>
  );
}

/** An apply run or a refresh run, as one row of a runs table. */
interface RunRow {
  id: string;
  state: string;
  status: string;
  succeeded: boolean;
  badge?: string;
  error: string | null;
  /** What the run did: `+/~/−` of an apply, checked/changed/failed of a refresh. */
  counts: [label: string, value: ComponentChildren][];
  fromVersion: number;
  toVersion: number | null;
  startedAt: string;
  finishedAt: string | null;
  actor: string;
}

function applyRun(r: ApplyRun): RunRow {
  return {
    id: r.run_id,
    state: r.state,
    status: r.status,
    succeeded: r.status === 'committed',
    error: r.error_summary,
    counts: [
      [
        '+/~/−',
        r.counters ? (
          <>
            <span class="add">+{r.counters.add}</span> <span class="chg">~{r.counters.change}</span>{' '}
            <span class="del">−{r.counters.destroy}</span>
          </>
        ) : (
          <span class="muted">—</span>
        ),
      ],
    ],
    fromVersion: r.base_version,
    toVersion: r.committed_version,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    actor: r.actor,
  };
}

function refreshRun(r: RefreshRun): RunRow {
  return {
    id: r.run_id,
    state: r.state_name,
    status: r.status,
    succeeded: r.status === 'succeeded',
    badge: r.dry_run ? 'dry run' : undefined,
    error: r.error_summary,
    counts: [
      ['Checked', r.checked],
      ['Changed', r.changed],
      ['Failed', r.failed],
    ],
    fromVersion: r.from_version,
    toVersion: r.to_version,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    actor: r.actor,
  };
}

function RunTable({ caption, rows }: { caption: string; rows: RunRow[] }) {
  const columns: Column<RunRow>[] = [
    {
      key: 'run',
      label: 'Run',
      render: (r) => (
        <>
          <code title={r.id}>{r.id.slice(0, 8)}</code>
          {r.badge && <span class="badge"> {r.badge}</span>}
        </>
      ),
    },
    {
      key: 'state',
      label: 'State',
      render: (r) => <a href={href(['state', r.state])}>{r.state}</a>,
    },
    {
      key: 'status',
      label: 'Status',
      render: (r) => (
        <>
          <span class={`badge ${r.succeeded ? 'good' : r.status === 'running' ? '' : 'bad'}`}>
            {r.status}
          </span>
          {r.error && <span class="muted"> {r.error}</span>}
        </>
      ),
    },
    ...(rows[0]?.counts ?? []).map(([label], i): Column<RunRow> => ({
      key: `count-${i}`,
      label,
      numeric: label !== '+/~/−',
      render: (r) => r.counts[i][1],
    })),
    {
      key: 'versions',
      label: 'Versions',
      render: (r) => (
        <>
          v{r.fromVersion} →{' '}
          {r.toVersion === null ? <span class="muted">no commit</span> : `v${r.toVersion}`}
        </>
      ),
    },
    { key: 'started', label: 'Started', render: (r) => <When at={r.startedAt} /> },
    {
      key: 'took',
      label: 'Took',
      render: (r) => (r.finishedAt ? duration(r.startedAt, r.finishedAt) : 'running'),
    },
    { key: 'by', label: 'By', render: (r) => r.actor },
  ];
  return <Table caption={caption} rows={rows} rowKey={(r) => r.id} columns={columns} />;
}

const RESERVATION_COLUMNS: Column<Reservation>[] = [
  { key: 'state', label: 'State', render: (r) => <a href={href(['state', r.state])}>{r.state}</a> },
  { key: 'glob', label: 'Addresses', render: (r) => <code>{r.glob}</code> },
  {
    key: 'mode',
    label: 'Mode',
    render: (r) => <span class={`badge ${r.mode === 'write' ? 'warn' : ''}`}>{r.mode}</span>,
  },
  {
    key: 'run',
    label: 'Run',
    render: (r) => <code title={r.run_id ?? ''}>{(r.run_id ?? '').slice(0, 8)}</code>,
  },
  { key: 'by', label: 'Held by', render: (r) => r.actor },
  { key: 'age', label: 'Age', render: (r) => <When at={r.acquired_at} /> },
  {
    key: 'lease',
    label: 'Lease ends',
    render: (r) =>
      r.expires_at ? new Date(r.expires_at).toISOString().replace('T', ' ').slice(0, 19) : '—',
  },
];

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
      <Table
        caption="Locks held now"
        rows={locks}
        rowKey={(l) => `${l.name} ${l.lockId}`}
        columns={[
          {
            key: 'state',
            label: 'State',
            render: (l) => <a href={href(['state', l.name])}>{l.name}</a>,
          },
          {
            key: 'who',
            label: 'Held by',
            render: (l) => (
              <>
                {l.who ?? '—'} <span class="muted">({l.acquiredBy})</span>
              </>
            ),
          },
          {
            key: 'operation',
            label: 'Operation',
            render: (l) => (
              <>
                {l.operation ?? '—'}
                {l.mode === 'read' && <span class="muted"> (shared with other plans)</span>}
              </>
            ),
          },
          { key: 'age', label: 'Age', render: (l) => <When at={l.acquiredAt} /> },
          { key: 'id', label: 'Lock ID', render: (l) => <code>{l.lockId}</code> },
          {
            key: 'actions',
            label: 'Actions',
            hideLabel: true,
            render: (l) => (
              <button type="button" class="danger" onClick={() => ask(l)}>
                Force unlock…
              </button>
            ),
          },
        ]}
      />
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
