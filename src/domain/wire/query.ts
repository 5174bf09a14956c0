/** What `POST /v1/query` answers (docs/api.md): the server builds it, `kl` and the dashboard read it. */
export interface SqlQueryResult {
  columns: { name: string; type: string }[];
  rows: unknown[][];
  /** More rows matched than `max_rows`. */
  truncated: boolean;
}
