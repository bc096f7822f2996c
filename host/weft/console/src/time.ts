// Times of the admin API are RFC 3339 strings, empty when not reached.

/** Milliseconds since the epoch, or null for an empty or unparsable time. */
export function parseTime(rfc3339: string | undefined): number | null {
  if (!rfc3339) return null;
  const ms = Date.parse(rfc3339);
  return Number.isNaN(ms) ? null : ms;
}

/** Elapsed milliseconds from start to finish, or to `now` while unfinished; null before start. */
export function elapsed(started: string, finished: string, now: number): number | null {
  const s = parseTime(started);
  if (s === null) return null;
  const f = parseTime(finished) ?? now;
  return Math.max(0, f - s);
}

/** A short human duration: 850ms, 12s, 3m 4s, 1h 2m, 2d 3h. */
export function formatDuration(ms: number | null): string {
  if (ms === null) return "";
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

/** Local date and time for a table cell; the raw RFC 3339 text goes in a title. */
export function formatTime(rfc3339: string): string {
  const ms = parseTime(rfc3339);
  if (ms === null) return "";
  const d = new Date(ms);
  const pad = (n: number) => String(n).padStart(2, "0");
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}
