import { touchesSensitive } from '../../domain/cty/mask-sensitive';
import { changedValues } from '../../domain/terraform/changed-paths';
import type { JsonValue } from '../../domain/terraform/json-value';
import { Empty, Guard, plural, Reveal, useToggle, Value, When } from '../components';
import { href, replaceParams, Route, useApi } from '../hooks';
import { REFRESH_EVENTS, VERSION_EVENTS } from '../live';
import type { DashboardState, DriftRow, RefreshRun } from '../types';

export function DriftPage({ route }: { route: Route }) {
  const state = route.params.get('state') ?? '';
  const drift = useApi<{ drift: DriftRow[]; truncated: boolean }>('/v1/dashboard/drift', [
    ...VERSION_EVENTS,
    'RefreshFinished',
  ]);
  const states = useApi<{ states: DashboardState[] }>('/v1/dashboard/states', false);
  const runs = useApi<{ runs: RefreshRun[] }>(
    `/v1/refresh-runs?limit=200${state ? `&state=${encodeURIComponent(state)}` : ''}`,
    REFRESH_EVENTS,
  );
  const [revealed, toggle] = useToggle();
  return (
    <section aria-labelledby="drift-title">
      <h1 id="drift-title">Drift</h1>
      <div class="filters">
        <label>
          State{' '}
          <select
            value={state}
            onChange={(e) => replaceParams(route, { state: e.currentTarget.value })}
          >
            <option value="">every state</option>
            {(states.data?.states ?? []).map((s) => (
              <option key={s.name} value={s.name}>
                {s.name}
              </option>
            ))}
          </select>
        </label>
        <Reveal revealed={revealed} onToggle={toggle} />
      </div>
      <Guard loaded={drift} what="drift">
        {({ drift: all, truncated }) => {
          const rows = state ? all.filter((d) => d.state === state) : all;
          if (rows.length === 0) {
            return (
              <Empty>
                No drift{state && <> in {state}</>}: every refreshed instance matches what terraform
                last wrote (<code>kl refresh &lt;state&gt;</code> checks again).
              </Empty>
            );
          }
          const groups = new Map<string, DriftRow[]>();
          for (const r of rows) {
            const key = `${r.type} · ${r.module || '(root)'}`;
            groups.set(key, [...(groups.get(key) ?? []), r]);
          }
          return (
            <>
              <p class="summary">
                {plural(rows.length, 'drifted instance')} in {plural(groups.size, 'group')}
                {truncated && ' (the first 5,000)'}
              </p>
              {[...groups].map(([key, items]) => (
                <section key={key} class="group" aria-label={key}>
                  <h2>
                    {key} <span class="muted">({items.length})</span>
                  </h2>
                  <ul class="drift-list">
                    {items.map((d) => (
                      <li key={`${d.state} ${d.address}`}>
                        <p>
                          <a href={href(['instance', d.state], { address: d.address })}>
                            {d.address}
                          </a>{' '}
                          <span class="muted">
                            in <a href={href(['state', d.state])}>{d.state}</a>, found in version{' '}
                            {d.detectedVersion}
                            {d.refreshRunId && (
                              <>
                                {' '}
                                by refresh run <code>{d.refreshRunId.slice(0, 8)}</code>
                              </>
                            )}
                          </span>
                        </p>
                        <DriftValues row={d} revealed={revealed} />
                      </li>
                    ))}
                  </ul>
                </section>
              ))}
            </>
          );
        }}
      </Guard>
      <h2>Refresh runs that found drift</h2>
      <Guard loaded={runs} what="refresh runs">
        {({ runs: list }) => {
          const found = list.filter((r) => r.changed > 0);
          if (found.length === 0) return <Empty>No refresh run has found drift yet.</Empty>;
          return (
            <ul>
              {found.map((r) => (
                <li key={r.run_id}>
                  <code>{r.run_id.slice(0, 8)}</code> on {r.state_name}: {r.changed} changed of{' '}
                  {r.checked} checked, {r.status}, by {r.actor} <When at={r.started_at} />
                </li>
              ))}
            </ul>
          );
        }}
      </Guard>
    </section>
  );
}

function DriftValues({ row, revealed }: { row: DriftRow; revealed: boolean }) {
  const changes = changedValues(
    row.previousAttributes as JsonValue,
    row.currentAttributes as JsonValue,
  );
  return (
    <table class="attr-diff">
      <thead>
        <tr>
          <th scope="col">Changed path</th>
          <th scope="col">Recorded before</th>
          <th scope="col">Found by refresh</th>
        </tr>
      </thead>
      <tbody>
        {changes.map((c) => {
          const masked = !revealed && touchesSensitive(c.path, row.sensitiveAttributes);
          return (
            <tr key={c.rendered}>
              <th scope="row">
                <code>{c.rendered}</code>
              </th>
              <td class="del">
                <Value value={c.before} masked={masked} />
              </td>
              <td class="add">
                <Value value={c.after} masked={masked} />
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
