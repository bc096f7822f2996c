// The console's URLs. Every page has a deep link; the Rust host answers
// index.html for any non-asset GET, so these are parsed on the client.
// Pure: unit-tested in routes.test.ts.
import { parseExpand } from "./graph/nested";
import { historyQuery, parseHistoryQuery, type HistoryFilters } from "./history";

export const DEFAULT_NAMESPACE = "default";

export type Route =
  /** namespace "" lists all namespaces; selector is a Kubernetes label selector. */
  | { page: "list"; namespace: string; selector: string }
  /**
   * expand: paths of the DAG boxes drawn open (`?expand=a,b/c`, see graph/nested.ts).
   * uid (`?uid=`): that archived execution exactly (a name may be used again
   * after its Workflow was deleted); absent for the live one (else the newest archived).
   */
  | { page: "workflow"; namespace: string; name: string; node: string | null; expand: string[]; uid?: string }
  /** Live and archived executions, filtered (see history.ts). */
  | { page: "history"; filters: HistoryFilters }
  | { page: "plugins" }
  /** The locks of one namespace (ListLocks has no "all namespaces"; "" asks for one). */
  | { page: "locks"; namespace: string }
  | { page: "notfound"; path: string };

function decode(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

function workflowRoute(namespace: string, name: string, node: string | null, search: string): Route {
  const q = new URLSearchParams(search);
  const uid = q.get("uid") ?? "";
  return { page: "workflow", namespace, name, node, expand: parseExpand(q.get("expand")), ...(uid ? { uid } : {}) };
}

export function parseRoute(pathname: string, search: string): Route {
  const segs = pathname.split("/").filter((s) => s !== "");
  const parts = segs.map(decode);
  if (parts.some((p) => p === null || p === "")) return { page: "notfound", path: pathname };
  const p = parts as string[];
  if (p.length === 0) {
    const q = new URLSearchParams(search);
    // A missing parameter means the default namespace; an empty one means all.
    const namespace = q.has("namespace") ? (q.get("namespace") ?? "") : DEFAULT_NAMESPACE;
    return { page: "list", namespace, selector: q.get("selector") ?? "" };
  }
  if (p.length === 1 && p[0] === "plugins") return { page: "plugins" };
  if (p.length === 1 && p[0] === "locks") {
    const q = new URLSearchParams(search);
    return { page: "locks", namespace: q.has("namespace") ? (q.get("namespace") ?? "") : DEFAULT_NAMESPACE };
  }
  if (p.length === 1 && p[0] === "history") return { page: "history", filters: parseHistoryQuery(search, DEFAULT_NAMESPACE) };
  if (p[0] === "workflows" && p.length === 3) return workflowRoute(p[1], p[2], null, search);
  if (p[0] === "workflows" && p.length === 5 && p[3] === "nodes") return workflowRoute(p[1], p[2], p[4], search);
  return { page: "notfound", path: pathname };
}

const enc = encodeURIComponent;

export function listHref(namespace: string, selector: string): string {
  const q = new URLSearchParams();
  if (namespace !== DEFAULT_NAMESPACE) q.set("namespace", namespace);
  if (selector !== "") q.set("selector", selector);
  const s = q.toString();
  return s ? `/?${s}` : "/";
}

/**
 * `?expand=...` for the open boxes (kept in the URL, so a link opens them
 * too) and `uid=` for an archived execution named exactly; "" for neither.
 */
function workflowQuery(expand: readonly string[], uid: string): string {
  const q = new URLSearchParams();
  if (expand.length > 0) q.set("expand", expand.join(","));
  if (uid !== "") q.set("uid", uid);
  const s = q.toString();
  return s ? `?${s}` : "";
}

export function workflowHref(namespace: string, name: string, expand: readonly string[] = [], uid = ""): string {
  return `/workflows/${enc(namespace)}/${enc(name)}${workflowQuery(expand, uid)}`;
}

export function nodeHref(namespace: string, name: string, node: string, expand: readonly string[] = [], uid = ""): string {
  return `/workflows/${enc(namespace)}/${enc(name)}/nodes/${enc(node)}${workflowQuery(expand, uid)}`;
}

export function historyHref(filters: HistoryFilters): string {
  return `/history${historyQuery(filters, DEFAULT_NAMESPACE)}`;
}

export const PLUGINS_HREF = "/plugins";

/** The locks page of a namespace (`/locks` for the default one). */
export function locksHref(namespace: string): string {
  if (namespace === DEFAULT_NAMESPACE) return "/locks";
  return `/locks?${new URLSearchParams({ namespace }).toString()}`;
}

/** The history page without filters (the default namespace). */
export const HISTORY_HREF = "/history";
