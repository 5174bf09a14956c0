import { duration, Empty, Guard, When } from '../components';
import { href, useApi } from '../hooks';
import type { ApplyRun, Reservation } from '../types';

/** Live reservations: apply runs' address globs with their leases, and terraform's own locks. */
export function Reservations() {
  const loaded = useApi<{ reservations: Reservation[] }>('/v1/api/reservations');
  return (
    <Guard loaded={loaded} what="reservations">
      {({ reservations }) => {
        const runs = reservations.filter((r) => r.kind === 'apply');
        if (runs.length === 0) {
          return <Empty>No apply run holds a reservation.</Empty>;
        }
        return (
          <div class="table-wrap">
            <table>
              <caption class="sr-only">Reservations held by apply runs</caption>
              <thead>
                <tr>
                  <th scope="col">State</th>
                  <th scope="col">Addresses</th>
                  <th scope="col">Mode</th>
                  <th scope="col">Run</th>
                  <th scope="col">Held by</th>
                  <th scope="col">Age</th>
                  <th scope="col">Lease ends</th>
                </tr>
              </thead>
              <tbody>
                {runs.map((r) => (
                  <tr key={r.id}>
                    <td data-label="State">
                      <a href={href(['state', r.state])}>{r.state}</a>
                    </td>
                    <td data-label="Addresses">
                      <code>{r.glob}</code>
                    </td>
                    <td data-label="Mode">
                      <span class={`badge ${r.mode === 'write' ? 'warn' : ''}`}>{r.mode}</span>
                    </td>
                    <td data-label="Run">
                      <code title={r.run_id ?? ''}>{(r.run_id ?? '').slice(0, 8)}</code>
                    </td>
                    <td data-label="Held by">{r.actor}</td>
                    <td data-label="Age">
                      <When at={r.acquired_at} />
                    </td>
                    <td data-label="Lease ends">
                      {r.expires_at
                        ? new Date(r.expires_at).toISOString().replace('T', ' ').slice(0, 19)
                        : '—'}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        );
      }}
    </Guard>
  );
}

export function ApplyRuns() {
  const loaded = useApi<{ runs: ApplyRun[] }>('/v1/api/apply-runs?limit=100');
  return (
    <Guard loaded={loaded} what="apply runs">
      {({ runs }) =>
        runs.length === 0 ? (
          <Empty>
            No apply run yet: <code>kl apply</code> starts one.
          </Empty>
        ) : (
          <div class="table-wrap">
            <table>
              <caption class="sr-only">Apply runs, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Run</th>
                  <th scope="col">State</th>
                  <th scope="col">Status</th>
                  <th scope="col">+/~/−</th>
                  <th scope="col">Versions</th>
                  <th scope="col">Started</th>
                  <th scope="col">Took</th>
                  <th scope="col">By</th>
                </tr>
              </thead>
              <tbody>
                {runs.map((r) => (
                  <tr key={r.run_id}>
                    <td data-label="Run">
                      <code title={r.run_id}>{r.run_id.slice(0, 8)}</code>
                    </td>
                    <td data-label="State">
                      <a href={href(['state', r.state])}>{r.state}</a>
                    </td>
                    <td data-label="Status">
                      <span
                        class={`badge ${r.status === 'committed' ? 'good' : r.status === 'running' ? '' : 'bad'}`}
                      >
                        {r.status}
                      </span>
                      {r.error_summary && <span class="muted"> {r.error_summary}</span>}
                    </td>
                    <td data-label="+/~/−">
                      {r.counters ? (
                        <>
                          <span class="add">+{r.counters.add}</span>{' '}
                          <span class="chg">~{r.counters.change}</span>{' '}
                          <span class="del">−{r.counters.destroy}</span>
                        </>
                      ) : (
                        <span class="muted">—</span>
                      )}
                    </td>
                    <td data-label="Versions">
                      v{r.base_version} →{' '}
                      {r.committed_version === null ? (
                        <span class="muted">no commit</span>
                      ) : (
                        `v${r.committed_version}`
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
  );
}
