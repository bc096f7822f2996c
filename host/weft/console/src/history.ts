// The history page's filters (`/history?...`): their URL query (so a
// filtered view is a link), the ListExecutions request they make, the
// date-time inputs' local times against the API's RFC 3339, the stack of
// page tokens behind Previous, and a node's history events. Pure:
// unit-tested in history.test.ts.

/** The phases a workflow can be listed by (ListExecutionsRequest.phase). */
export const WORKFLOW_PHASES = ["Pending", "Running", "Succeeded", "Failed", "Aborted"] as const;

export interface HistoryFilters {
  /** "" lists every namespace. */
  namespace: string;
  /** One of WORKFLOW_PHASES, or "" for any. */
  phase: string;
  /** A label selector: `k=v`, `k!=v`, `k`, `!k`, comma-separated. */
  selector: string;
  /** A WorkflowTemplate's name (or `namespace/name`). */
  template: string;
  /** Names starting with this. */
  prefix: string;
  /** Started at or after / before these RFC 3339 times ("" for no bound). */
  after: string;
  before: string;
}

const KEYS = ["phase", "selector", "template", "prefix", "after", "before"] as const;

/**
 * The filters of a `/history` query; a missing namespace is
 * `defaultNamespace`, an empty one all. Values are kept as typed (the
 * form writes them to the URL while one types); the request trims them.
 */
export function parseHistoryQuery(search: string, defaultNamespace: string): HistoryFilters {
  const q = new URLSearchParams(search);
  const get = (k: string) => q.get(k) ?? "";
  return {
    namespace: q.has("namespace") ? get("namespace") : defaultNamespace,
    phase: get("phase"),
    selector: get("selector"),
    template: get("template"),
    prefix: get("prefix"),
    after: get("after"),
    before: get("before"),
  };
}

/** The query for `f` ("" or `?...`): only what is set, so parseHistoryQuery gives `f` back. */
export function historyQuery(f: HistoryFilters, defaultNamespace: string): string {
  const q = new URLSearchParams();
  if (f.namespace !== defaultNamespace) q.set("namespace", f.namespace);
  for (const k of KEYS) if (f[k] !== "") q.set(k, f[k]);
  const s = q.toString();
  return s ? `?${s}` : "";
}

/** Whether any filter besides the namespace is set. */
export function isFiltered(f: HistoryFilters): boolean {
  return KEYS.some((k) => f[k].trim() !== "");
}

/** The ListExecutions request of a page: live and archived executions, filtered. */
export function historyRequest(f: HistoryFilters, pageToken: string, limit: number) {
  return {
    namespace: f.namespace.trim(),
    labelSelector: f.selector.trim(),
    includeArchived: true,
    phase: f.phase.trim(),
    template: f.template.trim(),
    namePrefix: f.prefix.trim(),
    startedAfter: f.after.trim(),
    startedBefore: f.before.trim(),
    limit,
    pageToken,
  };
}

const pad = (n: number) => String(n).padStart(2, "0");

/**
 * A `datetime-local` input's value (local time, `YYYY-MM-DDTHH:MM[:SS]`)
 * as RFC 3339 in UTC (`...Z`, whole seconds, as the server parses it);
 * "" for an empty or unparsable value.
 */
export function localToRfc3339(local: string): string {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(local)) return "";
  // A date-time without an offset is local time.
  const ms = new Date(local).getTime();
  if (Number.isNaN(ms)) return "";
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** An RFC 3339 time as a `datetime-local` value in local time (seconds only when set); "" when unparsable. */
export function rfc3339ToLocal(rfc3339: string): string {
  if (rfc3339 === "") return "";
  const ms = Date.parse(rfc3339);
  if (Number.isNaN(ms)) return "";
  const d = new Date(ms);
  const base = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
  return d.getSeconds() === 0 ? base : `${base}:${pad(d.getSeconds())}`;
}

/**
 * The pages seen so far, as the tokens that fetched them: the first is
 * "" (the first page), the last is the page shown. Next pushes the
 * server's `next_page_token`; Previous pops.
 */
export type PageStack = readonly string[];

export const FIRST_PAGE: PageStack = [""];

export function currentToken(pages: PageStack): string {
  return pages[pages.length - 1] ?? "";
}

export function nextPage(pages: PageStack, nextPageToken: string): PageStack {
  return nextPageToken === "" ? pages : [...pages, nextPageToken];
}

export function previousPage(pages: PageStack): PageStack {
  return pages.length > 1 ? pages.slice(0, -1) : FIRST_PAGE;
}

/** The parts of an ExecutionEvent the node panel shows. */
export interface HistoryEvent {
  kind: string;
  nodeId: string;
  attempt: number;
  phase: string;
  at: string;
  reason: string;
  message: string;
}

/**
 * A node's events (its own and its task attempts'), oldest first. The
 * server sends them oldest first; equal times keep that order.
 */
export function nodeEvents<E extends HistoryEvent>(events: readonly E[], nodeId: string): E[] {
  const at = (e: E) => {
    const ms = Date.parse(e.at);
    return Number.isNaN(ms) ? 0 : ms;
  };
  return events
    .map((e, i) => ({ e, i }))
    .filter(({ e }) => e.kind !== "workflow" && e.nodeId === nodeId)
    .sort((a, b) => at(a.e) - at(b.e) || a.i - b.i)
    .map(({ e }) => e);
}
