// Numbers, sizes, dates and durations as the page shows them.

export function tokens(n) {
  if (n === null || n === undefined) return "–";
  if (n < 1000) return String(n);
  if (n < 10_000) return `${(n / 1000).toFixed(1)}k`;
  if (n < 1_000_000) return `${Math.round(n / 1000)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}

export function bytes(n) {
  if (n < 1000) return `${n} chars`;
  return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k chars`;
}

export function seconds(s) {
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${Math.round(s)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

/** How old a cached search is: "from cache, 12 min old". */
export function age(s) {
  if (s < 60) return `${Math.round(s)} s old`;
  if (s < 3600) return `${Math.round(s / 60)} min old`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min old`;
}

export function cost(value) {
  if (value === null || value === undefined) return null;
  return value < 0.01 && value > 0 ? `$${value.toFixed(4)}` : `$${value.toFixed(2)}`;
}

/** Dollars as doctor and the Status panel write them: "0.015 $". */
export function dollars(value) {
  return `${value.toFixed(3)} $`;
}

export function percent(part, whole) {
  return whole ? Math.round((100 * part) / whole) : 0;
}

export function day(iso) {
  return iso ? iso.slice(0, 10) : "";
}

/** "Today", "Yesterday" or the date, for grouping the conversation list. */
export function dayGroup(iso, now = new Date()) {
  const date = new Date(iso);
  const start = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
  const days = Math.round((start(now) - start(date)) / 86_400_000);
  if (days <= 0) return "Today";
  if (days === 1) return "Yesterday";
  if (days < 7) return "Previous 7 days";
  return date.toLocaleDateString(undefined, { year: "numeric", month: "long" });
}
