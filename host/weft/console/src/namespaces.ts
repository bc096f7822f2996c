// The namespaces the caller may list executions in (ListNamespaces, asked
// once per page load): the Workflows and Locks pages' namespace picker
// and the top bar's links. A server without ListNamespaces (UNIMPLEMENTED)
// or a failed call leaves everything as before: a namespace text field and
// "default". The choices are pure, unit-tested in namespaces.test.ts.
import { Code, ConnectError } from "@connectrpc/connect";
import { useEffect, useState, useSyncExternalStore } from "react";
import { admin } from "./api";
import { DEFAULT_NAMESPACE } from "./routes";

export type Namespaces =
  | { state: "loading" }
  | { state: "listed"; namespaces: string[] }
  /** `retry`: worth asking again later (not UNIMPLEMENTED). */
  | { state: "failed"; text: string; retry: boolean };

/** How long a page that opened on the implicit "default" waits for the list before listing "default". */
export const WAIT_FOR_NAMESPACES_MS = 3000;

/** The listed namespaces, or null while unknown (loading, failed). */
export function listed(n: Namespaces): string[] | null {
  return n.state === "listed" ? n.namespaces : null;
}

/**
 * Where the top bar's Workflows and Locks links go: "default" when it is
 * allowed or nothing is known (not listed, an empty list), else the first
 * allowed namespace.
 */
export function defaultNamespace(namespaces: readonly string[] | null): string {
  if (namespaces === null || namespaces.length === 0 || namespaces.includes(DEFAULT_NAMESPACE)) return DEFAULT_NAMESPACE;
  return namespaces[0];
}

/**
 * The namespace a page shows for its URL's: a page opened on the implicit
 * "default" (no `?namespace=`) goes to `defaultNamespace` once the list
 * is known, and waits for it (null) unless `waited` (gave up waiting).
 * A namespace named in the URL is kept, allowed or not (the server says
 * what it refuses).
 */
export function resolveNamespace(route: string, n: Namespaces, waited: boolean): string | null {
  if (route !== DEFAULT_NAMESPACE) return route;
  if (n.state === "listed") return defaultNamespace(n.namespaces);
  if (n.state === "loading" && !waited) return null;
  return route;
}

export interface PickerOption {
  value: string;
  label: string;
  /** One of the listed namespaces (else the page's own, shown but not offered). */
  listed: boolean;
}

/**
 * The picker's options: exactly the listed namespaces, in the server's
 * order; the page's namespace first when it is not one of them (a link
 * to another namespace, "" for all), so the select shows what the page
 * lists. While the list is unknown, the page's namespace alone.
 */
export function pickerOptions(namespaces: readonly string[] | null, current: string, emptyLabel: string): PickerOption[] {
  const label = (ns: string) => (ns === "" ? emptyLabel : ns);
  if (namespaces === null) return [{ value: current, label: label(current), listed: false }];
  const opts = namespaces.map((ns) => ({ value: ns, label: ns, listed: true }));
  if (namespaces.includes(current)) return opts;
  return [{ value: current, label: current === "" ? emptyLabel : `${current} (not listed)`, listed: false }, ...opts];
}

/** ListNamespaces' answer as a state: the names as given, without blanks and repeats. */
export function listedState(namespaces: readonly string[]): Namespaces {
  return { state: "listed", namespaces: [...new Set(namespaces.filter((ns) => ns !== ""))] };
}

export function failedState(e: unknown): Namespaces {
  const unimplemented = e instanceof ConnectError && e.code === Code.Unimplemented;
  return { state: "failed", text: e instanceof Error ? e.message : String(e), retry: !unimplemented };
}

export interface NamespaceStore {
  get(): Namespaces;
  subscribe(l: () => void): () => void;
  /** Lists them unless listed, under way, or failed for good (UNIMPLEMENTED). */
  load(): void;
}

export function createNamespaceStore(list: () => Promise<string[]>): NamespaceStore {
  let state: Namespaces = { state: "loading" };
  let busy = false;
  const listeners = new Set<() => void>();
  const set = (next: Namespaces) => {
    state = next;
    for (const l of listeners) l();
  };
  return {
    get: () => state,
    subscribe(l) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    load() {
      if (busy || state.state === "listed" || (state.state === "failed" && !state.retry)) return;
      busy = true;
      const done = (next: Namespaces) => {
        busy = false;
        set(next);
      };
      list().then(
        (ns) => done(listedState(ns)),
        (e: unknown) => done(failedState(e)),
      );
    },
  };
}

let store: NamespaceStore | null = null;

/** The page's store, calling the admin API. */
function namespaceStore(): NamespaceStore {
  store ??= createNamespaceStore(async () => (await admin.listNamespaces({})).namespaces);
  return store;
}

const subscribe = (l: () => void) => namespaceStore().subscribe(l);
const snapshot = () => namespaceStore().get();

/** The namespaces, listed on first use. */
export function useNamespaces(): Namespaces {
  const n = useSyncExternalStore(subscribe, snapshot);
  useEffect(() => namespaceStore().load(), []);
  return n;
}

/**
 * The namespace the page shows for its URL's (see resolveNamespace):
 * null while it waits for the list, at most WAIT_FOR_NAMESPACES_MS.
 */
export function useResolvedNamespace(route: string, n: Namespaces): string | null {
  const [waited, setWaited] = useState(false);
  const waiting = resolveNamespace(route, n, false) === null;
  useEffect(() => {
    if (!waiting) return;
    const t = setTimeout(() => setWaited(true), WAIT_FOR_NAMESPACES_MS);
    return () => clearTimeout(t);
  }, [waiting]);
  return resolveNamespace(route, n, waited);
}
