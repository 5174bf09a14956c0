/** `90`, `90s`, `15m`, `1h30m` → seconds; null when it is none of these. */
export function parseDuration(text: string): number | null {
  if (/^\d{1,7}$/.test(text)) return Number(text);
  const m = /^(?:(\d{1,4})h)?(?:(\d{1,5})m)?(?:(\d{1,7})s)?$/.exec(text);
  if (!m || text === '') return null;
  return Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0);
}

/** `12s`, `14m48s`, `2h5m`: how long ago, or how long until. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${s % 60}s`;
  return `${Math.floor(m / 60)}h${m % 60}m`;
}

/** How long ago an instant was, or null when there is none. */
export function ago(iso: string | null, now: number): string | null {
  return iso === null ? null : formatDuration(now - Date.parse(iso));
}
