import { maskSensitive } from '../../domain/cty/mask-sensitive';
import { changedPaths } from '../../domain/terraform/changed-paths';
import type { JsonValue } from '../../domain/terraform/json-value';
import { stateApi } from '../api';
import { Empty, Guard, Reveal, useToggle } from '../components';
import { href, useApi } from '../hooks';
import { VERSION_EVENTS } from '../live';
import type { Json, Lifecycle, Neighbours, ResourceDetail } from '../types';

export function InstancePage({ name, address }: { name: string; address: string }) {
  const detail = useApi<{ current: ResourceDetail | null; history: Lifecycle[] }>(
    stateApi(name, `/resources/${encodeURIComponent(address)}?history=true`),
    VERSION_EVENTS,
  );
  const [revealed, toggle] = useToggle();
  return (
    <section aria-labelledby="instance-title">
      <p class="crumbs">
        <a href={href(['resources', name])}>Resources of {name}</a> /
      </p>
      <h1 id="instance-title" class="address">
        {address}
      </h1>
      <Guard loaded={detail} what="the instance">
        {({ current, history }) => (
          <>
            {current ? (
              <>
                <dl class="facts">
                  <dt>Type</dt>
                  <dd>{current.type}</dd>
                  <dt>Module</dt>
                  <dd>{current.module || '(root)'}</dd>
                  <dt>Provider</dt>
                  <dd class="provider">{current.provider}</dd>
                  <dt>Since</dt>
                  <dd>
                    version {current.sinceVersion} (serial {current.sinceSerial})
                  </dd>
                  {current.status && (
                    <>
                      <dt>Status</dt>
                      <dd>
                        <span class="badge bad">{current.status}</span>
                      </dd>
                    </>
                  )}
                </dl>
                <h2>
                  Attributes <Reveal revealed={revealed} onToggle={toggle} />
                </h2>
                <Attributes
                  value={
                    revealed
                      ? current.attributes
                      : (maskSensitive(
                          current.attributes as JsonValue,
                          current.sensitiveAttributes,
                        ) as Json)
                  }
                />
                <Dependencies name={name} address={address} />
              </>
            ) : (
              <Empty>
                This instance is gone from the current version; its lifecycles are below.
              </Empty>
            )}
            <h2>Lifecycle</h2>
            <LifecycleTable history={history} />
          </>
        )}
      </Guard>
    </section>
  );
}

function Attributes({ value }: { value: Json | null }) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return <pre class="json">{JSON.stringify(value, null, 2)}</pre>;
  }
  const keys = Object.keys(value).sort();
  if (keys.length === 0) return <Empty>No attributes.</Empty>;
  return (
    <div class="table-wrap">
      <table class="attributes">
        <caption class="sr-only">Attributes</caption>
        <tbody>
          {keys.map((k) => (
            <tr key={k}>
              <th scope="row">
                <code>{k}</code>
              </th>
              <td>
                {value[k] === '(sensitive value)' ? (
                  <span class="masked">(sensitive value)</span>
                ) : (
                  <pre class="json">{JSON.stringify(value[k], null, 2)}</pre>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function LifecycleTable({ history }: { history: Lifecycle[] }) {
  return (
    <div class="table-wrap">
      <table>
        <caption class="sr-only">Lifecycles, oldest first</caption>
        <thead>
          <tr>
            <th scope="col">Versions</th>
            <th scope="col">Serials</th>
            <th scope="col">What changed when it began</th>
          </tr>
        </thead>
        <tbody>
          {history.map((l, i) => {
            const previous = history[i - 1];
            const touching = previous && previous.deleteVersion === l.createVersion;
            return (
              <tr key={l.createVersion}>
                <td data-label="Versions">
                  v{l.createVersion} → {l.deleteVersion === null ? 'now' : `v${l.deleteVersion}`}
                </td>
                <td data-label="Serials">
                  {l.createSerial} → {l.deleteSerial ?? 'now'}
                </td>
                <td data-label="Changed">
                  {touching
                    ? changedPaths(
                        previous.attributes as JsonValue,
                        l.attributes as JsonValue,
                      ).join(', ') || 'instance fields other than attributes'
                    : i === 0
                      ? 'created'
                      : 're-created'}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

const MAX_DRAWN = 8;

/** Depends on (left), this resource (middle), dependents (right): a small blast-radius graph. */
function Dependencies({ name, address }: { name: string; address: string }) {
  const n = useApi<Neighbours>(
    `/v1/dashboard/dependencies?state=${encodeURIComponent(name)}&address=${encodeURIComponent(address)}`,
    VERSION_EVENTS,
  );
  return (
    <section aria-labelledby="deps-title">
      <h2 id="deps-title">Dependencies</h2>
      <Guard loaded={n} what="dependencies">
        {(d) => (
          <>
            <Graph data={d} />
            <div class="columns">
              <div>
                <h3>Depends on ({d.dependsOn.length})</h3>
                {d.dependsOn.length === 0 ? (
                  <Empty>Nothing.</Empty>
                ) : (
                  <ul>
                    {d.dependsOn.map((t) => (
                      <li key={t.resourceAddress}>
                        <a href={href(['resources', name], { glob: `${t.resourceAddress}*` })}>
                          {t.resourceAddress}
                        </a>{' '}
                        <span class="muted">({t.instances} instances)</span>
                      </li>
                    ))}
                  </ul>
                )}
              </div>
              <div>
                <h3>Depended on by ({d.dependentsTotal})</h3>
                {d.dependents.length === 0 ? (
                  <Empty>Nothing depends on {d.resourceAddress}.</Empty>
                ) : (
                  <ul>
                    {d.dependents.map((a) => (
                      <li key={a}>
                        <a href={href(['instance', name], { address: a })}>{a}</a>
                      </li>
                    ))}
                    {d.dependentsTotal > d.dependents.length && (
                      <li class="muted">and {d.dependentsTotal - d.dependents.length} more</li>
                    )}
                  </ul>
                )}
              </div>
            </div>
          </>
        )}
      </Guard>
    </section>
  );
}

function Graph({ data }: { data: Neighbours }) {
  const left = data.dependsOn.slice(0, MAX_DRAWN).map((d) => d.resourceAddress);
  const right = data.dependents.slice(0, MAX_DRAWN);
  const rows = Math.max(1, left.length, right.length);
  const h = rows * 28 + 20;
  const w = 720;
  const y = (i: number, n: number) => 10 + ((i + 0.5) * (h - 20)) / Math.max(1, n);
  const cut = (s: string) => (s.length > 34 ? `…${s.slice(-33)}` : s);
  return (
    <svg
      class="graph"
      viewBox={`0 0 ${w} ${h}`}
      role="img"
      aria-label={`${left.length} dependencies, ${data.dependentsTotal} dependents`}
    >
      {left.map((l, i) => (
        <g key={`l${l}`}>
          <line x1={230} y1={y(i, left.length)} x2={280} y2={h / 2} class="edge" />
          <text x={225} y={y(i, left.length) + 4} text-anchor="end">
            {cut(l)}
          </text>
        </g>
      ))}
      {right.map((r, i) => (
        <g key={`r${r}`}>
          <line x1={440} y1={h / 2} x2={490} y2={y(i, right.length)} class="edge" />
          <text x={495} y={y(i, right.length) + 4}>
            {cut(r)}
          </text>
        </g>
      ))}
      <rect x={280} y={h / 2 - 13} width={160} height={26} rx={6} class="node" />
      <text x={360} y={h / 2 + 4} text-anchor="middle" class="self">
        {cut(data.resourceAddress).slice(-22)}
      </text>
    </svg>
  );
}
