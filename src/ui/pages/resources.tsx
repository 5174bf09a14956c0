import { useState } from 'preact/hooks';
import { query } from '../api';
import { Empty, Guard, Pager } from '../components';
import { href, replaceParams, Route, useApi } from '../hooks';
import { VERSION_EVENTS } from '../live';
import type { DashboardState, Facet, Facets, ResourcePage } from '../types';

const PAGE = 100;
/** The root module's path is `''`; the hash spells it so. */
const ROOT = '(root)';

export function ResourcesPage({ name, route }: { name: string; route: Route }) {
  // The list of every state only fills the picker: asked for when it is needed, so a big
  // state's page does not wait on it.
  const [picking, setPicking] = useState(!name);
  const states = useApi<{ states: DashboardState[] }>(
    picking ? '/v1/dashboard/states' : null,
    false,
  );
  const p = route.params;
  const offset = Number(p.get('offset') ?? 0) || 0;
  const page = useApi<ResourcePage>(
    name
      ? `/v1/dashboard/resources${query({
          state: name,
          type: p.get('type'),
          module: p.get('module') === ROOT ? undefined : p.get('module'),
          provider: p.get('provider'),
          address_glob: p.get('glob'),
          offset,
          limit: PAGE,
          facets: 'false',
        })}${p.get('module') === ROOT ? '&module=' : ''}`
      : null,
    VERSION_EVENTS,
    true,
  );
  // The filters' values apart from the rows, asked once the rows are there: the first row
  // does not wait for them (a grouping of every instance), nor share kld with them, and
  // another page or filter does not ask for them again.
  const facets = useApi<{ facets: Facets }>(
    name && page.data ? `/v1/dashboard/resource-facets${query({ state: name })}` : null,
    VERSION_EVENTS,
  );
  const set = (params: Record<string, string | undefined>) =>
    replaceParams(route, { ...params, offset: undefined });
  return (
    <section aria-labelledby="resources-title">
      <h1 id="resources-title">Resources{name && <> of {name}</>}</h1>
      <div class="filters">
        <label>
          State{' '}
          <select
            value={name}
            onFocus={() => setPicking(true)}
            onPointerDown={() => setPicking(true)}
            onChange={(e) => (location.hash = href(['resources', e.currentTarget.value]))}
          >
            <option value="">Choose a state…</option>
            {name && !states.data && <option value={name}>{name}</option>}
            {(states.data?.states ?? []).map((s) => (
              <option key={s.name} value={s.name}>
                {s.name}
              </option>
            ))}
          </select>
        </label>
        {name && (
          <>
            <FacetSelect
              label="Type"
              facets={facets.data?.facets.types}
              value={p.get('type')}
              onChange={(v) => set({ type: v })}
            />
            <FacetSelect
              label="Module"
              facets={facets.data?.facets.modules}
              value={p.get('module') === ROOT ? '' : p.get('module')}
              onChange={(v) => set({ module: v === '' ? ROOT : v })}
              show={(v) => v || ROOT}
            />
            <FacetSelect
              label="Provider"
              facets={facets.data?.facets.providers}
              value={p.get('provider')}
              onChange={(v) => set({ provider: v })}
            />
            <label>
              Address glob{' '}
              <input
                type="search"
                value={p.get('glob') ?? ''}
                placeholder="module.app.*"
                onInput={(e) => set({ glob: e.currentTarget.value })}
              />
            </label>
          </>
        )}
      </div>
      {!name ? (
        <Empty>Choose a state to see its resources.</Empty>
      ) : (
        <Guard loaded={page} what="resources">
          {(r) =>
            r.total === 0 ? (
              <Empty>No instance matches these filters.</Empty>
            ) : (
              <>
                <p class="summary">
                  {r.total.toLocaleString('en')} instance{r.total === 1 ? '' : 's'}
                </p>
                <div class="table-wrap">
                  <table>
                    <caption class="sr-only">Instances</caption>
                    <thead>
                      <tr>
                        <th scope="col">Address</th>
                        <th scope="col">Type</th>
                        <th scope="col">Module</th>
                        <th scope="col">Provider</th>
                        <th scope="col" class="num">
                          Since version
                        </th>
                      </tr>
                    </thead>
                    <tbody>
                      {r.rows.map((row) => (
                        <tr key={row.address}>
                          <td data-label="Address">
                            <a href={href(['instance', name], { address: row.address })}>
                              {row.address}
                            </a>
                            {row.status && <span class="badge bad"> {row.status}</span>}
                          </td>
                          <td data-label="Type">{row.type}</td>
                          <td data-label="Module">
                            {row.module || <span class="muted">(root)</span>}
                          </td>
                          <td data-label="Provider" class="provider">
                            {row.provider}
                          </td>
                          <td data-label="Since" class="num">
                            {row.sinceVersion}
                          </td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
                <Pager
                  offset={r.offset}
                  size={PAGE}
                  total={r.total}
                  onPage={(o) => replaceParams(route, { offset: o || undefined })}
                />
              </>
            )
          }
        </Guard>
      )}
    </section>
  );
}

function FacetSelect(props: {
  label: string;
  facets: Facet[] | undefined;
  value: string | null;
  onChange: (value: string | undefined) => void;
  show?: (value: string) => string;
}) {
  const value = props.value ?? undefined;
  return (
    <label>
      {props.label}{' '}
      <select
        value={value === undefined ? '*' : value}
        onChange={(e) =>
          props.onChange(e.currentTarget.value === '*' ? undefined : e.currentTarget.value)
        }
      >
        <option value="*">all</option>
        {value !== undefined && !props.facets?.some((f) => f.value === value) && (
          <option value={value}>{value}</option>
        )}
        {(props.facets ?? []).map((f) => (
          <option key={f.value} value={f.value}>
            {(props.show ?? ((v: string) => v))(f.value)} ({f.count})
          </option>
        ))}
      </select>
    </label>
  );
}
