import {
  Column,
  Empty,
  globMatcher,
  Guard,
  Pager,
  plural,
  Table,
  sortRows,
  When,
} from '../components';
import { href, replaceParams, Route, useApi } from '../hooks';
import type { DashboardState } from '../types';

const PAGE = 100;

const COLUMNS: Column<DashboardState>[] = [
  {
    key: 'name',
    label: 'State',
    render: (s) => <a href={href(['state', s.name])}>{s.name}</a>,
    sort: (s) => s.name,
  },
  {
    key: 'version',
    label: 'Version',
    render: (s) => s.version,
    sort: (s) => s.version,
    numeric: true,
  },
  {
    key: 'serial',
    label: 'Serial',
    render: (s) => s.serial ?? '—',
    sort: (s) => s.serial ?? -1,
    numeric: true,
  },
  {
    key: 'instances',
    label: 'Instances',
    render: (s) => s.instanceCount.toLocaleString('en'),
    sort: (s) => s.instanceCount,
    numeric: true,
  },
  {
    key: 'written',
    label: 'Last write',
    render: (s) =>
      s.lastWrite ? (
        <>
          {s.lastWrite.actor} <span class="muted">({s.lastWrite.source})</span>{' '}
          <When at={s.lastWrite.at} />
        </>
      ) : (
        <span class="muted">never written</span>
      ),
    sort: (s) => s.lastWrite?.at ?? '',
  },
  {
    key: 'lock',
    label: 'Lock / runs',
    render: (s) =>
      s.lock || s.applyRuns.count > 0 ? (
        <>
          {s.lock && (
            <span class="badge warn" title={`lock ${s.lock.id}`}>
              locked by {s.lock.who ?? s.lock.by} <When at={s.lock.since} />
            </span>
          )}{' '}
          {s.applyRuns.count > 0 && (
            <span class="badge" title="apply runs holding reservations">
              {plural(s.applyRuns.count, 'apply run')}: {s.applyRuns.holders.join(', ')}
            </span>
          )}
        </>
      ) : (
        <span class="muted">free</span>
      ),
    sort: (s) => (s.lock ? 2 : 0) + (s.applyRuns.count > 0 ? 1 : 0),
  },
  {
    key: 'drift',
    label: 'Drift',
    render: (s) =>
      s.driftCount > 0 ? (
        <a class="badge bad" href={href(['drift'], { state: s.name })}>
          {s.driftCount} drifted
        </a>
      ) : (
        <span class="muted">0</span>
      ),
    sort: (s) => s.driftCount,
    numeric: true,
  },
];

export function StatesPage({ route }: { route: Route }) {
  const loaded = useApi<{ states: DashboardState[] }>('/v1/dashboard/states');
  const glob = route.params.get('glob') ?? '';
  const sort = { key: route.params.get('sort') ?? 'name', desc: route.params.get('desc') === '1' };
  const offset = Number(route.params.get('offset') ?? 0) || 0;
  return (
    <section aria-labelledby="states-title">
      <h1 id="states-title">States</h1>
      <div class="filters">
        <label>
          Name glob{' '}
          <input
            type="search"
            value={glob}
            placeholder="team/prod/*"
            onInput={(e) =>
              replaceParams(route, { glob: e.currentTarget.value, offset: undefined })
            }
          />
        </label>
      </div>
      <Guard loaded={loaded} what="states">
        {({ states }) => {
          if (states.length === 0) {
            return (
              <Empty>
                No state yet. Point terraform's <code>http</code> backend at{' '}
                <code>{location.origin}/v1/states/&lt;name&gt;</code> and apply, or{' '}
                <code>kl import</code> a state file.
              </Empty>
            );
          }
          const match = globMatcher(glob);
          const rows = sortRows(
            states.filter((s) => match(s.name)),
            COLUMNS,
            sort,
          );
          if (rows.length === 0) return <Empty>No state name matches “{glob}”.</Empty>;
          return (
            <>
              <p class="summary">
                {rows.length.toLocaleString('en')} of {states.length.toLocaleString('en')} states
              </p>
              <Table
                caption="States"
                rows={rows.slice(offset, offset + PAGE)}
                columns={COLUMNS}
                rowKey={(s) => s.name}
                sort={sort}
                onSort={(s) =>
                  replaceParams(route, { sort: s.key, desc: s.desc ? '1' : undefined })
                }
              />
              <Pager
                offset={offset}
                size={PAGE}
                total={rows.length}
                onPage={(o) => replaceParams(route, { offset: o || undefined })}
              />
            </>
          );
        }}
      </Guard>
    </section>
  );
}
