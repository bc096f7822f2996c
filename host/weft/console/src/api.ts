// The admin API client: gRPC-Web (binary) to the origin that served the
// console, with the bearer token added to every call, or, under single
// sign-on (sso.ts), the session cookie the browser adds by itself.
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { getToken, noteAuthFailure, waitForToken } from "./auth";
import { sso } from "./sso";
import { AdminService } from "./gen/weft/admin/v1/admin_pb";

export type {
  Execution,
  ExecutionEvent,
  NodeExecution,
  NodeDetails,
  PluginInfo,
  KubeEvent,
  ItemExecution,
  LockInfo,
  LockClaim,
} from "./gen/weft/admin/v1/admin_pb";

/**
 * A refusal that asks for credentials: UNAUTHENTICATED, and with bearer
 * tokens PERMISSION_DENIED too (another token may be allowed). Under
 * single sign-on PERMISSION_DENIED names the signed-in user and what they
 * may not do: an error to show, not a reason to sign in again.
 */
export function isAuthError(e: unknown): boolean {
  if (!(e instanceof ConnectError)) return false;
  if (e.code === Code.Unauthenticated) return true;
  return e.code === Code.PermissionDenied && sso.currentMode() !== "sso";
}

/** Resolves when `signal` aborts (never, else): a call waiting for the browser to sign in and come back. */
function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve());
  });
}

function authorize(header: Headers): void {
  const token = getToken();
  if (token) header.set("authorization", `Bearer ${token}`);
  else header.delete("authorization");
}

/**
 * Adds `authorization: Bearer <token>`. A refused unary call shows the
 * token prompt, waits for a token and is sent once more; a refused stream
 * shows the prompt and fails, and its owner reconnects (see watch loops),
 * because a stream's request cannot be replayed here.
 *
 * Under single sign-on (known before the first call: `/auth/config`) no
 * bearer token is sent (the server would prefer it to the session cookie);
 * an UNAUTHENTICATED call sends the browser to sign in (or shows the Sign
 * in button) and a unary one waits until the page is left.
 */
const auth: Interceptor = (next) => async (req) => {
  const single = (await sso.authMode()) === "sso";
  if (single) req.header.delete("authorization");
  else authorize(req.header);
  try {
    return await next(req);
  } catch (e) {
    if (!isAuthError(e)) throw e;
    if (single) {
      sso.signInRequired(ConnectError.from(e).rawMessage);
      if (req.stream) throw e;
      await untilAborted(req.signal);
      throw e;
    }
    noteAuthFailure(ConnectError.from(e).rawMessage);
    if (req.stream) throw e;
    await waitForToken(req.signal).catch(() => {
      throw e;
    });
    authorize(req.header);
    return await next(req);
  }
};

/**
 * Aborted when the page is left. Browsers may keep a left page (and its
 * open fetches) in the back/forward cache; its never-ending streams would
 * then hold HTTP/1.1 connections (six per origin) until the next page load
 * has none left. So every call is cut on pagehide, and a page restored from
 * that cache reloads to get fresh streams.
 */
const pageLife = new AbortController();
if (typeof window !== "undefined") {
  window.addEventListener("pagehide", () => pageLife.abort());
  window.addEventListener("pageshow", (e) => {
    if (e.persisted) window.location.reload();
  });
}

function either(a: AbortSignal, b: AbortSignal): AbortSignal {
  if (typeof AbortSignal.any === "function") return AbortSignal.any([a, b]);
  const c = new AbortController();
  const stop = () => c.abort();
  if (a.aborted || b.aborted) stop();
  a.addEventListener("abort", stop);
  b.addEventListener("abort", stop);
  return c.signal;
}

// `credentials: "same-origin"` (fetch's default, said here so nothing
// turns it off): the single sign-on session cookie goes with every call.
const pageFetch: typeof fetch = (input, init) =>
  fetch(input, {
    ...init,
    credentials: "same-origin",
    signal: init?.signal ? either(init.signal, pageLife.signal) : pageLife.signal,
  });

const transport = createGrpcWebTransport({
  baseUrl: globalThis.location?.origin ?? "",
  useBinaryFormat: true,
  interceptors: [auth],
  fetch: pageFetch,
});

export const admin = createClient(AdminService, transport);

/**
 * After a stream was refused: shows the prompt with the server's words and
 * resolves once a token was entered (never rejects; an abort just resolves).
 * Under single sign-on: signs in (leaving the page) and resolves on abort only.
 */
export async function tokenAfterRefusal(e: unknown, signal: AbortSignal): Promise<void> {
  if (sso.currentMode() === "sso") {
    sso.signInRequired(ConnectError.from(e).rawMessage);
    await untilAborted(signal);
    return;
  }
  noteAuthFailure(ConnectError.from(e).rawMessage);
  await waitForToken(signal).catch(() => undefined);
}

/** The text for the error banner: the gRPC status name and message. */
export function errorText(e: unknown): string {
  if (e instanceof ConnectError) {
    const name = Code[e.code] ?? `code ${e.code}`;
    return `${name}: ${e.rawMessage || "(no message)"}`;
  }
  return e instanceof Error ? e.message : String(e);
}

export function isAbort(e: unknown): boolean {
  return (
    (e instanceof ConnectError && e.code === Code.Canceled) ||
    (e instanceof DOMException && e.name === "AbortError")
  );
}

/** Resolves after `ms`, or at once when the signal aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    });
  });
}

/**
 * Calls `fn` now and again `everyMs` after each call finishes, until the
 * signal aborts; a refused call waits for a token instead.
 */
export async function poll(
  everyMs: number,
  signal: AbortSignal,
  fn: (signal: AbortSignal) => Promise<void>,
  onError: (e: unknown) => void,
): Promise<void> {
  while (!signal.aborted) {
    try {
      await fn(signal);
    } catch (e) {
      if (signal.aborted || isAbort(e)) return;
      onError(e);
    }
    await sleep(everyMs, signal);
  }
}
