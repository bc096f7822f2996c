// The console's URLs. Every page has a deep link; the Rust host answers
// index.html for any non-asset GET, so these are parsed on the client.
// Pure: unit-tested in routes.test.ts.
import { parseExpand } from "./graph/nested";

export const DEFAULT_NAMESPACE = "default";

export type Route =
  /** namespace "" lists all namespaces; selector is a Kubernetes label selector. */
  | { page: "list"; namespace: string; selector: string }
  /** expand: paths of the DAG boxes drawn open (`?expand=a,b/c`, see graph/nested.ts). */
  | { page: "workflow"; namespace: string; name: string; node: string | null; expand: string[] }
  | { page: "plugins" }
  | { page: "notfound"; path: string };

function decode(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

function expandOf(search: string): string[] {
  return parseExpand(new URLSearchParams(search).get("expand"));
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
  if (p[0] === "workflows" && p.length === 3) {
    return { page: "workflow", namespace: p[1], name: p[2], node: null, expand: expandOf(search) };
  }
  if (p[0] === "workflows" && p.length === 5 && p[3] === "nodes") {
    return { page: "workflow", namespace: p[1], name: p[2], node: p[4], expand: expandOf(search) };
  }
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

/** `?expand=...` for the open boxes (kept in the URL, so a link opens them too); "" for none. */
function expandQuery(expand: readonly string[]): string {
  return expand.length === 0 ? "" : `?${new URLSearchParams({ expand: expand.join(",") })}`;
}

export function workflowHref(namespace: string, name: string, expand: readonly string[] = []): string {
  return `/workflows/${enc(namespace)}/${enc(name)}${expandQuery(expand)}`;
}

export function nodeHref(namespace: string, name: string, node: string, expand: readonly string[] = []): string {
  return `/workflows/${enc(namespace)}/${enc(name)}/nodes/${enc(node)}${expandQuery(expand)}`;
}

export const PLUGINS_HREF = "/plugins";
