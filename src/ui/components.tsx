import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import type { ApiError } from './api';

/** Loading, error and empty states, said in words and announced to screen readers. */
export function Loading({ what }: { what: string }) {
  return (
    <p class="status loading" role="status">
      Loading {what}…
    </p>
  );
}

export function Failure({ error, retry }: { error: ApiError; retry?: () => void }) {
  return (
    <div class="status error" role="alert">
      <strong>{error.status === 0 ? 'No answer' : `Error ${error.status}`}</strong>{' '}
      <code>{error.code}</code>: {error.message}
      {retry && (
        <button type="button" onClick={retry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="status empty">{children}</p>;
}

/** What a page shows until its data is there: loading, the error, or the data. */
export function Guard<T>(props: {
  loaded: { data: T | null; error: ApiError | null; loading: boolean; reload: () => void };
  what: string;
  children: (data: T) => ComponentChildren;
}) {
  const { data, error, reload } = props.loaded;
  if (data !== null) {
    return (
      <>
        {error && <Failure error={error} retry={reload} />}
        {props.children(data)}
      </>
    );
  }
  if (error) return <Failure error={error} retry={reload} />;
  return <Loading what={props.what} />;
}

export function When({ at }: { at: string | null | undefined }) {
  if (!at) return <span class="muted">—</span>;
  const date = new Date(at);
  return (
    <time dateTime={date.toISOString()} title={date.toISOString()}>
      {ago(date)}
    </time>
  );
}

export function ago(date: Date, now = Date.now()): string {
  const s = Math.round((now - date.getTime()) / 1000);
  if (s < 5) return 'just now';
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

export function duration(from: string, to: string | null): string {
  const ms = (to ? new Date(to).getTime() : Date.now()) - new Date(from).getTime();
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export interface Column<T> {
  key: string;
  label: string;
  render: (row: T) => ComponentChildren;
  /** Sort value; columns without one (or `sortable`) are not sortable. */
  sort?: (row: T) => string | number;
  /** Sortable, by whoever answers the rows (kld sorts the States page). */
  sortable?: boolean;
  numeric?: boolean;
  /** The label of a card's field at phone width, when not `label`. */
  cardLabel?: string;
  /** A column of actions: its header is for screen readers only, its cells unlabelled. */
  hideLabel?: boolean;
  class?: string;
}

export interface Sort {
  key: string;
  desc: boolean;
}

/**
 * A table of `columns`. With `sort`, the headers of columns that can sort
 * are buttons (keyboard and screen-reader friendly); at phone width, where
 * the rows become cards and the headers are hidden, a select above the
 * cards sorts instead.
 */
export function Table<T>(props: {
  rows: T[];
  columns: Column<T>[];
  rowKey: (row: T) => string;
  caption: string;
  sort?: Sort;
  onSort?: (sort: Sort) => void;
  class?: string;
}) {
  const { sort, onSort } = props;
  const sortable = sort && onSort ? props.columns.filter((c) => c.sort || c.sortable) : [];
  return (
    <>
      {sort && onSort && sortable.length > 0 && (
        <label class="phone-sort">
          Sort by{' '}
          <select
            value={`${sort.key}:${sort.desc ? 'desc' : 'asc'}`}
            onChange={(e) => {
              const [key, dir] = e.currentTarget.value.split(':');
              onSort({ key, desc: dir === 'desc' });
            }}
          >
            {sortable.flatMap((c) => [
              <option key={`${c.key}:asc`} value={`${c.key}:asc`}>
                {c.label}, {c.numeric ? 'lowest' : 'A to Z'} first
              </option>,
              <option key={`${c.key}:desc`} value={`${c.key}:desc`}>
                {c.label}, {c.numeric ? 'highest' : 'Z to A'} first
              </option>,
            ])}
          </select>
        </label>
      )}
      <div class="table-wrap">
        <table class={props.class}>
          <caption class="sr-only">{props.caption}</caption>
          <thead>
            <tr>
              {props.columns.map((c) => (
                <th
                  key={c.key}
                  scope="col"
                  class={c.numeric ? 'num' : undefined}
                  aria-sort={
                    sort?.key === c.key ? (sort.desc ? 'descending' : 'ascending') : undefined
                  }
                >
                  {(c.sort || c.sortable) && sort && onSort ? (
                    <button
                      type="button"
                      class="sort"
                      onClick={() =>
                        onSort({ key: c.key, desc: sort.key === c.key ? !sort.desc : false })
                      }
                    >
                      {c.label}
                      <span aria-hidden="true">
                        {sort.key === c.key ? (sort.desc ? ' ▾' : ' ▴') : ''}
                      </span>
                    </button>
                  ) : c.hideLabel ? (
                    <span class="sr-only">{c.label}</span>
                  ) : (
                    c.label
                  )}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {props.rows.map((row) => (
              <tr key={props.rowKey(row)}>
                {props.columns.map((c) => (
                  <td
                    key={c.key}
                    class={c.numeric ? 'num' : c.class}
                    data-label={c.hideLabel ? undefined : (c.cardLabel ?? c.label)}
                  >
                    {c.render(row)}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

export function Pager(props: {
  offset: number;
  size: number;
  total: number;
  onPage: (offset: number) => void;
}) {
  const { offset, size, total } = props;
  if (total <= size) return null;
  const last = Math.floor((total - 1) / size) * size;
  return (
    <nav class="pager" aria-label="Pages">
      <button
        type="button"
        disabled={offset === 0}
        onClick={() => props.onPage(Math.max(0, offset - size))}
      >
        ← Previous
      </button>
      <span>
        {offset + 1}–{Math.min(offset + size, total)} of {total.toLocaleString('en')}
      </span>
      <button
        type="button"
        disabled={offset >= last}
        onClick={() => props.onPage(Math.min(last, offset + size))}
      >
        Next →
      </button>
    </nav>
  );
}

/** A JSON value printed compactly; a masked one says so until revealed. */
export function Value({ value, masked }: { value: unknown; masked?: boolean }) {
  if (masked) return <span class="masked">(sensitive value)</span>;
  if (value === undefined) return <span class="muted">(absent)</span>;
  return <code class="value">{JSON.stringify(value)}</code>;
}

export function Reveal({ revealed, onToggle }: { revealed: boolean; onToggle: () => void }) {
  return (
    <button type="button" class="reveal" aria-pressed={revealed} onClick={onToggle}>
      {revealed ? 'Hide sensitive values' : 'Reveal sensitive values'}
    </button>
  );
}

export function useToggle(initial = false): [boolean, () => void] {
  const [on, set] = useState(initial);
  return [on, () => set((v) => !v)];
}

/** `1 instance`, `2 instances`, `1,000 states`. */
export function plural(n: number, word: string): string {
  return `${n.toLocaleString('en')} ${word}${n === 1 ? '' : 's'}`;
}
