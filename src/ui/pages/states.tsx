import { STATE_SORTS } from '../../domain/wire/dashboard';
import { query } from '../api';
import { Column, Empty, Guard, Pager, plural, Table, When } from '../components';
import { href, replaceParams, Route, useApi } from '../hooks';
import type { DashboardState, StatePage, StateSort } from '../types';

const PAGE = 100;

const COLUMNS: Column<DashboardState>[] = [
  {
    key: 'name',
    label: 'State',
    render: (s) => <a href={href(['state', s.name])}>{s.name}</a>,
    sortable: true,
  },
  {
    key: 'version',
    label: 'Version',
    render: (s) => s.version,
    sortable: true,
    numeric: true,
  },
  {
    key: 'serial',
    label: 'Serial',
    render: (s) => s.serial ?? '—',
    sortable: true,
    numeric: true,
  },
  {
    key: 'instances',
    label: 'Instances',
    render: (s) => s.instanceCount.toLocaleString('en'),
    sortable: true,
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
    sortable: true,
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
    sortable: true,
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
    sortable: true,
    numeric: true,
  },
];

/** The sort the hash asks for, if kld knows it (else by name). */
function sortKey(raw: string | null): StateSort {
  return (STATE_SORTS as readonly string[]).includes(raw ?? '') ? (raw as StateSort) : 'name';
}

/**
 * One page of the states, filtered and sorted by kld: opening the page does
 * not wait for every state, and a live event asks for this page again, not
 * for the whole list.
 */
export function StatesPage({ route }: { route: Route }) {
  const glob = route.params.get('glob') ?? '';
  const sort = { key: sortKey(route.params.get('sort')), desc: route.params.get('desc') === '1' };
  const offset = Math.max(0, Number(route.params.get('offset') ?? 0) || 0);
  const loaded = useApi<StatePage>(
    `/v1/dashboard/states${query({
      glob,
      sort: sort.key === 'name' ? undefined : sort.key,
      order: sort.desc ? 'desc' : undefined,
      offset: offset || undefined,
      limit: PAGE,
    })}`,
    undefined,
    true,
  );
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
        {(page) => {
          if (page.unfiltered === 0) {
            return (
              <Empty>
                No state yet. Point terraform's <code>http</code> backend at{' '}
                <code>{location.origin}/v1/states/&lt;name&gt;</code> and apply, or{' '}
                <code>kl import</code> a state file.
              </Empty>
            );
          }
          if (page.total === 0) return <Empty>No state name matches “{glob}”.</Empty>;
          const pager = (
            <Pager
              offset={page.offset}
              size={PAGE}
              total={page.total}
              onPage={(o) => replaceParams(route, { offset: o || undefined })}
            />
          );
          return (
            // Busy while the next answer (another page, sort or glob) is on its way.
            <div aria-busy={loaded.loading ? 'true' : undefined}>
              <p class="summary">
                {page.total.toLocaleString('en')} of {page.unfiltered.toLocaleString('en')} states
              </p>
              {page.states.length === 0 ? (
                // States deleted since the page was chosen: the pager leads back.
                <Empty>No state on this page any more.</Empty>
              ) : (
                <Table
                  caption="States"
                  rows={page.states}
                  columns={COLUMNS}
                  rowKey={(s) => s.name}
                  sort={sort}
                  onSort={(s) =>
                    replaceParams(route, {
                      sort: s.key,
                      desc: s.desc ? '1' : undefined,
                      offset: undefined,
                    })
                  }
                />
              )}
              {pager}
            </div>
          );
        }}
      </Guard>
    </section>
  );
}
