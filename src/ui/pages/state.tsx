import { useState } from 'preact/hooks';
import { touchesSensitive } from '../../domain/cty/mask-sensitive';
import { changedValues } from '../../domain/terraform/changed-paths';
import type { JsonValue } from '../../domain/terraform/json-value';
import { ApiError, request, saveFile, stateApi } from '../api';
import { Empty, Failure, Guard, Loading, Reveal, useToggle, Value, When } from '../components';
import { href, replaceParams, Route, useApi } from '../hooks';
import { VERSION_EVENTS } from '../live';
import type { History, ResourceDetail, StateDiff, VersionChanges, VersionRow } from '../types';

export function StatePage({ name, route }: { name: string; route: Route }) {
  const history = useApi<History>(stateApi(name, '/history'), VERSION_EVENTS);
  const changes = useApi<{ changes: VersionChanges[] }>(
    `/v1/dashboard/changes?state=${encodeURIComponent(name)}`,
    VERSION_EVENTS,
  );
  return (
    <section aria-labelledby="state-title">
      <p class="crumbs">
        <a href={href(['states'])}>States</a> /
      </p>
      <h1 id="state-title">{name}</h1>
      <Guard loaded={history} what="the history">
        {(h) => {
          if (h.versions.length === 0)
            return <Empty>This state is locked but has no version yet.</Empty>;
          // Null until the changes have loaded: "none" would claim a version changed nothing.
          const byVersion = changes.data
            ? new Map(changes.data.changes.map((c) => [c.version, c]))
            : null;
          const latest = h.versions[h.versions.length - 1];
          const to = Number(route.params.get('to')) || latest.version;
          const from = Number(route.params.get('from')) || Math.max(1, latest.version - 1);
          return (
            <>
              <p class="summary">
                Version {latest.version} · serial {latest.serial} ·{' '}
                {latest.instanceCount.toLocaleString('en')} instances · written by {latest.actor}{' '}
                <When at={latest.createdAt} />
                {h.deletedAt && (
                  <>
                    {' '}
                    · <span class="badge bad">deleted</span> <When at={h.deletedAt} />
                  </>
                )}
                {' · '}
                <a href={href(['resources', name])}>Resources</a> ·{' '}
                <a href={href(['drift'], { state: name })}>Drift</a>
              </p>
              <CountChart versions={h.versions} />
              <h2>History</h2>
              <Timeline
                name={name}
                versions={h.versions}
                changes={byVersion}
                from={from}
                to={to}
                onPick={(side, v) => replaceParams(route, { [side]: v })}
              />
              <DiffView name={name} from={from} to={to} />
            </>
          );
        }}
      </Guard>
    </section>
  );
}

/** Instance count over versions, as a small SVG line with labelled ends. */
function CountChart({ versions }: { versions: VersionRow[] }) {
  const w = 600;
  const h = 120;
  const pad = 30;
  const max = Math.max(1, ...versions.map((v) => v.instanceCount));
  const first = versions[0].version;
  const span = Math.max(1, versions[versions.length - 1].version - first);
  const x = (v: number) => pad + ((v - first) / span) * (w - 2 * pad);
  const y = (n: number) => h - pad + 10 - (n / max) * (h - pad - 10);
  const points = versions
    .map((v) => `${x(v.version).toFixed(1)},${y(v.instanceCount).toFixed(1)}`)
    .join(' ');
  return (
    <figure class="chart">
      <svg
        viewBox={`0 0 ${w} ${h}`}
        role="img"
        aria-label={`Instance count over ${versions.length} versions, at most ${max}`}
      >
        <line x1={pad} y1={y(0)} x2={w - pad} y2={y(0)} class="axis" />
        <text x={pad - 4} y={y(max) + 4} class="tick" text-anchor="end">
          {max}
        </text>
        <text x={pad - 4} y={y(0) + 4} class="tick" text-anchor="end">
          0
        </text>
        <text x={pad} y={h - 4} class="tick">
          v{first}
        </text>
        <text x={w - pad} y={h - 4} class="tick" text-anchor="end">
          v{versions[versions.length - 1].version}
        </text>
        <polyline points={points} class="line" />
        {versions.length <= 200 &&
          versions.map((v) => (
            <circle key={v.version} cx={x(v.version)} cy={y(v.instanceCount)} r={3} class="dot">
              <title>
                v{v.version}: {v.instanceCount} instances
              </title>
            </circle>
          ))}
      </svg>
      <figcaption>Instances per version</figcaption>
    </figure>
  );
}

function Timeline(props: {
  name: string;
  versions: VersionRow[];
  /** Null while loading. */
  changes: Map<number, VersionChanges> | null;
  from: number;
  to: number;
  onPick: (side: 'from' | 'to', version: number) => void;
}) {
  const [error, setError] = useState<ApiError | null>(null);
  const download = async (v: VersionRow) => {
    setError(null);
    try {
      const res = await request(
        `${stateApi(props.name).replace('/v1/api/states/', '/v1/states/')}?version=${v.version}`,
      );
      saveFile(`${props.name.replace(/\//g, '_')}.v${v.version}.tfstate`, await res.blob());
    } catch (err) {
      setError(err as ApiError);
    }
  };
  return (
    <>
      {error && <Failure error={error} />}
      <div class="table-wrap">
        <table class="timeline">
          <caption class="sr-only">Versions, newest first; pick two to compare</caption>
          <thead>
            <tr>
              <th scope="col" class="num">
                Version
              </th>
              <th scope="col" class="num">
                Serial
              </th>
              <th scope="col">Source</th>
              <th scope="col">Actor</th>
              <th scope="col">When</th>
              <th scope="col">Instances +/~/−</th>
              <th scope="col">Compare</th>
              <th scope="col">Document</th>
            </tr>
          </thead>
          <tbody>
            {[...props.versions].reverse().map((v) => {
              const c = props.changes?.get(v.version);
              return (
                <tr
                  key={v.version}
                  class={v.version === props.from || v.version === props.to ? 'picked' : undefined}
                >
                  <td class="num" data-label="Version">
                    {v.version}
                  </td>
                  <td class="num" data-label="Serial">
                    {v.serial}
                  </td>
                  <td data-label="Source">
                    {v.source}
                    {v.lineageChangedFrom && (
                      <span class="badge warn" title={`was ${v.lineageChangedFrom}`}>
                        {' '}
                        new lineage
                      </span>
                    )}
                  </td>
                  <td data-label="Actor">{v.actor}</td>
                  <td data-label="When">
                    <When at={v.createdAt} />
                  </td>
                  <td data-label="Changes" class="changes">
                    {c ? (
                      <>
                        <span class="add">+{c.added}</span> <span class="chg">~{c.changed}</span>{' '}
                        <span class="del">−{c.removed}</span>
                      </>
                    ) : (
                      <span class="muted">{props.changes ? 'none' : '…'}</span>
                    )}{' '}
                    <span class="muted">({v.instanceCount})</span>
                  </td>
                  <td data-label="Compare" class="pick">
                    <label>
                      <input
                        type="radio"
                        name="from"
                        checked={v.version === props.from}
                        onChange={() => props.onPick('from', v.version)}
                      />{' '}
                      A
                    </label>
                    <label>
                      <input
                        type="radio"
                        name="to"
                        checked={v.version === props.to}
                        onChange={() => props.onPick('to', v.version)}
                      />{' '}
                      B
                    </label>
                  </td>
                  <td data-label="Document">
                    <button
                      type="button"
                      class="link"
                      onClick={() => download(v)}
                      aria-label={`Download version ${v.version}`}
                    >
                      Download
                    </button>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </>
  );
}

function DiffView({ name, from, to }: { name: string; from: number; to: number }) {
  const diff = useApi<StateDiff>(
    stateApi(name, `/diff?from_version=${from}&to_version=${to}`),
    false,
  );
  const [revealed, toggle] = useToggle();
  return (
    <section aria-labelledby="diff-title" class="diff">
      <h2 id="diff-title">
        Changes from version {from} (A) to version {to} (B)
      </h2>
      <Guard loaded={diff} what="the diff">
        {(d) => {
          if (d.added.length + d.removed.length + d.changed.length === 0) {
            return <Empty>No instance differs between these two versions.</Empty>;
          }
          return (
            <>
              <p class="summary">
                <span class="add">{d.added.length} added</span> ·{' '}
                <span class="chg">{d.changed.length} changed</span> ·{' '}
                <span class="del">{d.removed.length} removed</span>{' '}
                <Reveal revealed={revealed} onToggle={toggle} />
              </p>
              <ul class="diff-list">
                {d.added.map((a) => (
                  <li key={`+${a}`} class="add">
                    + <a href={href(['instance', name], { address: a })}>{a}</a>
                  </li>
                ))}
                {d.removed.map((a) => (
                  <li key={`-${a}`} class="del">
                    − {a}
                  </li>
                ))}
                {d.changed.map((c) => (
                  <li key={`~${c.address}`} class="chg">
                    <details>
                      <summary>
                        ~ {c.address}{' '}
                        <span class="muted">{[...c.attributes, ...c.members].join(', ')}</span>
                      </summary>
                      <AttributeDiff
                        name={name}
                        address={c.address}
                        from={d.from.version}
                        to={d.to.version}
                        revealed={revealed}
                      />
                    </details>
                  </li>
                ))}
              </ul>
            </>
          );
        }}
      </Guard>
    </section>
  );
}

/** Before and after of each changed attribute path; sensitive ones masked until revealed. */
function AttributeDiff(props: {
  name: string;
  address: string;
  from: number;
  to: number;
  revealed: boolean;
}) {
  const at = (v: number) =>
    stateApi(props.name, `/resources/${encodeURIComponent(props.address)}?version=${v}`);
  const before = useApi<{ current: ResourceDetail }>(at(props.from), false);
  const after = useApi<{ current: ResourceDetail }>(at(props.to), false);
  if (before.error) return <Failure error={before.error} />;
  if (after.error) return <Failure error={after.error} />;
  if (!before.data || !after.data) return <Loading what="the attributes" />;
  const b = before.data.current;
  const a = after.data.current;
  const rows = changedValues(b.attributes as JsonValue, a.attributes as JsonValue);
  if (rows.length === 0)
    return <Empty>The attributes are equal; another member of the instance changed.</Empty>;
  return (
    <table class="attr-diff">
      <thead>
        <tr>
          <th scope="col">Attribute</th>
          <th scope="col">A (v{props.from})</th>
          <th scope="col">B (v{props.to})</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((r) => {
          const masked =
            !props.revealed &&
            (touchesSensitive(r.path, b.sensitiveAttributes) ||
              touchesSensitive(r.path, a.sensitiveAttributes));
          return (
            <tr key={r.rendered}>
              <th scope="row">
                <code>{r.rendered}</code>
              </th>
              <td class="del">
                <Value value={r.before} masked={masked} />
              </td>
              <td class="add">
                <Value value={r.after} masked={masked} />
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
