// Single sign-on (OpenID Connect), done by the admin API's `/auth/*` pages
// on this origin. When `/auth/config` names an issuer, people sign in with
// the identity provider: the server keeps the ID token in an HttpOnly
// session cookie (this script never sees it), which every same-origin
// call carries. A missing or expired session (`/auth/me` 401, a call
// refused UNAUTHENTICATED) sends the browser to `/auth/login?next=<here>`
// instead of the token prompt; a refusal (PERMISSION_DENIED) is an error
// to show, not a sign-in problem. Without an issuer nothing changes: the
// bearer token prompt of auth.ts.
//
// Redirect loops (a cookie the browser drops, a session /auth/me accepts
// but the API does not...) are cut: at most one automatic trip to the
// provider per page load, and none within LOOP_WINDOW_MS of the last one
// (kept in sessionStorage, so it spans the trip); then the page shows a
// "Sign in" button. After "Sign out" the page does not sign in again by
// itself either (the provider may still have a session and would let the
// browser straight back in).
//
// The decisions are pure functions and the effects are injected
// (createSso), so both are unit-tested in sso.test.ts.
import { useSyncExternalStore } from "react";

/** "token": the bearer-token prompt (no issuer, or an older server); "sso": sign in with the provider. */
export type AuthMode = "token" | "sso";

/** `GET /auth/config`. */
export interface AuthConfig {
  issuer: string | null;
  cliClientId: string | null;
  scopes: string[];
}

/** `GET /auth/me`: who the session cookie is. */
export interface Me {
  user: string;
  groups: string[];
  /** Unix seconds; null when the token has none. */
  expires: number | null;
}

export type MeAnswer =
  | { state: "signed-in"; me: Me }
  /** 401: no session, or one no longer valid; `reason` is the server's text. */
  | { state: "signed-out"; reason: string }
  /** Anything else (the provider unreachable, a 5xx...): not a reason to leave the page. */
  | { state: "unknown"; reason: string };

export const LOGOUT_HREF = "/auth/logout";
/** No automatic trip to the provider within this long after the last one. */
export const LOOP_WINDOW_MS = 60_000;
/** How long the console waits for `/auth/config` before going on without single sign-on. */
export const CONFIG_TIMEOUT_MS = 5_000;

const REDIRECTED_AT_KEY = "weft.signin.redirectedAt";
const SIGNED_OUT_KEY = "weft.signin.signedOut";

function parseJson(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);
const nonEmpty = (v: unknown): string | null => (typeof v === "string" && v !== "" ? v : null);

/**
 * `/auth/config`'s answer, or null for anything else: a server without
 * single sign-on support answers index.html (or 404) there.
 */
export function parseConfig(status: number, body: string): AuthConfig | null {
  if (status !== 200) return null;
  const v = parseJson(body);
  if (!isObject(v) || !("issuer" in v)) return null;
  return { issuer: nonEmpty(v.issuer), cliClientId: nonEmpty(v.cliClientId), scopes: strings(v.scopes) };
}

export function modeOf(config: AuthConfig | null): AuthMode {
  return config?.issuer ? "sso" : "token";
}

/** `/auth/me`'s answer. */
export function parseMe(status: number, body: string): MeAnswer {
  const text = body.trim();
  if (status === 401) return { state: "signed-out", reason: text || "not signed in" };
  if (status === 200) {
    const v = parseJson(body);
    if (isObject(v) && typeof v.user === "string" && v.user !== "") {
      const expires = typeof v.expires === "number" && Number.isFinite(v.expires) ? v.expires : null;
      return { state: "signed-in", me: { user: v.user, groups: strings(v.groups), expires } };
    }
    return { state: "unknown", reason: "/auth/me answered something else than who is signed in" };
  }
  return { state: "unknown", reason: `/auth/me answered ${status}${text ? `: ${text.slice(0, 300)}` : ""}` };
}

/** The sign-in page, coming back to `next` (a path and query of this origin). */
export function loginHref(next: string): string {
  const path = next.startsWith("/") && !next.startsWith("//") ? next : "/";
  return `/auth/login?next=${encodeURIComponent(path)}`;
}

export interface GuardInput {
  now: number;
  /** When the browser last went to the provider from this tab; null: never; undefined: storage unreadable. */
  lastRedirect: number | null | undefined;
  /** This page load already sent the browser there once. */
  redirectedThisLoad: boolean;
  /** The user signed out in this tab (and has not signed in since). */
  signedOut: boolean;
}

/**
 * Whether a missing session sends the browser to the provider by itself
 * ("redirect") or shows the "Sign in" button ("prompt").
 */
export function decideSignIn(g: GuardInput): "redirect" | "prompt" {
  if (g.signedOut || g.redirectedThisLoad) return "prompt";
  // Without storage a loop could not be told from a first visit.
  if (g.lastRedirect === undefined) return "prompt";
  // Also "recent" when the clock went back.
  if (g.lastRedirect !== null && g.now - g.lastRedirect < LOOP_WINDOW_MS) return "prompt";
  return "redirect";
}

/** The groups as the user element's title. */
export function groupsTitle(groups: readonly string[]): string {
  return groups.length === 0 ? "no groups" : groups.join(", ");
}

export interface SignIn {
  /** "redirecting": the browser is on its way to the provider; "prompt": the Sign in button shows. */
  phase: "redirecting" | "prompt";
  reason: string;
  /** Shown because the user signed out (not because signing in failed). */
  signedOut: boolean;
}

export interface SsoState {
  /** null until `/auth/config` answered (or timed out). */
  mode: AuthMode | null;
  issuer: string | null;
  /** The signed-in user, once `/auth/me` said so. */
  me: Me | null;
  signIn: SignIn | null;
}

/** What the flow needs of the browser. */
export interface SsoEnv {
  /** A same-origin GET (credentials included): status and body; rejects on network errors or `signal`. */
  get(path: string, signal: AbortSignal): Promise<{ status: number; body: string }>;
  /** A full-page navigation (`location.assign`). */
  assign(href: string): void;
  /** The current path and query. */
  here(): string;
  now(): number;
  /** sessionStorage, or null when it cannot be used. */
  storage(): Pick<Storage, "getItem" | "setItem" | "removeItem"> | null;
  configTimeoutMs?: number;
}

export interface Sso {
  getState(): SsoState;
  subscribe(l: () => void): () => void;
  /** The mode, once `/auth/config` answered (memoized; never rejects). */
  authMode(): Promise<AuthMode>;
  /** The mode if known yet. */
  currentMode(): AuthMode | null;
  /**
   * Asks `/auth/config` and, under single sign-on, `/auth/me` (once).
   * Resolves to a problem worth showing (`/auth/me` failed otherwise than
   * 401), or null.
   */
  start(): Promise<string | null>;
  /** A call was refused UNAUTHENTICATED (or `/auth/me` said 401): to the provider, or the button. */
  signInRequired(reason: string): void;
  /** The "Sign in" button. */
  signInNow(): void;
  /** Before following the "Sign out" link. */
  noteSigningOut(): void;
}

export function createSso(env: SsoEnv): Sso {
  let state: SsoState = { mode: null, issuer: null, me: null, signIn: null };
  const listeners = new Set<() => void>();
  let modePromise: Promise<AuthMode> | null = null;
  let started: Promise<string | null> | null = null;
  let redirectedThisLoad = false;

  const set = (next: Partial<SsoState>) => {
    state = { ...state, ...next };
    for (const l of listeners) l();
  };

  const store = () => {
    try {
      return env.storage();
    } catch {
      return null;
    }
  };
  const read = (key: string): string | null | undefined => {
    const s = store();
    if (!s) return undefined;
    try {
      return s.getItem(key);
    } catch {
      return undefined;
    }
  };
  const write = (key: string, value: string | null) => {
    const s = store();
    try {
      if (value === null) s?.removeItem(key);
      else s?.setItem(key, value);
    } catch {
      // Storage full or refused: the guard then prompts instead of redirecting.
    }
  };
  const lastRedirect = (): number | null | undefined => {
    const v = read(REDIRECTED_AT_KEY);
    if (v === undefined || v === null) return v;
    const n = Number(v);
    return Number.isFinite(n) ? n : null;
  };

  /** To the provider, coming back here. */
  const go = (reason: string) => {
    redirectedThisLoad = true;
    write(REDIRECTED_AT_KEY, String(env.now()));
    set({ me: null, signIn: { phase: "redirecting", reason, signedOut: false } });
    env.assign(loginHref(env.here()));
  };

  const authMode = (): Promise<AuthMode> => {
    if (modePromise) return modePromise;
    modePromise = (async () => {
      const ctl = new AbortController();
      const timer = setTimeout(() => ctl.abort(), env.configTimeoutMs ?? CONFIG_TIMEOUT_MS);
      let config: AuthConfig | null = null;
      try {
        const r = await env.get("/auth/config", ctl.signal);
        config = parseConfig(r.status, r.body);
      } catch {
        // Unreachable or too slow: go on as before single sign-on.
      } finally {
        clearTimeout(timer);
      }
      const mode = modeOf(config);
      set({ mode, issuer: config?.issuer ?? null });
      return mode;
    })();
    return modePromise;
  };

  const signInRequired = (reason: string) => {
    if (state.mode !== "sso") return;
    if (state.signIn?.phase === "redirecting") return;
    const signedOut = read(SIGNED_OUT_KEY) === "1";
    const action = decideSignIn({ now: env.now(), lastRedirect: lastRedirect(), redirectedThisLoad, signedOut });
    if (action === "redirect") {
      go(reason);
      return;
    }
    const prev = state.signIn;
    if (prev && prev.reason === reason && prev.signedOut === signedOut && state.me === null) return;
    set({ me: null, signIn: { phase: "prompt", reason, signedOut } });
  };

  const start = (): Promise<string | null> => {
    if (started) return started;
    started = (async () => {
      if ((await authMode()) !== "sso") return null;
      let answer: MeAnswer;
      try {
        const r = await env.get("/auth/me", new AbortController().signal);
        answer = parseMe(r.status, r.body);
      } catch (e) {
        answer = { state: "unknown", reason: `/auth/me: ${e instanceof Error ? e.message : String(e)}` };
      }
      switch (answer.state) {
        case "signed-in":
          // Signed in (again, maybe in another tab): sign-out no longer holds back.
          write(SIGNED_OUT_KEY, null);
          if (state.signIn?.phase !== "redirecting") set({ me: answer.me, signIn: null });
          return null;
        case "signed-out":
          signInRequired(answer.reason);
          return null;
        case "unknown":
          return answer.reason;
      }
    })();
    return started;
  };

  return {
    getState: () => state,
    subscribe(l) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    authMode,
    currentMode: () => state.mode,
    start,
    signInRequired,
    signInNow() {
      write(SIGNED_OUT_KEY, null);
      go(state.signIn?.reason ?? "");
    },
    noteSigningOut() {
      write(SIGNED_OUT_KEY, "1");
    },
  };
}

/** The browser's: same-origin fetches with the session cookie, sessionStorage, location.assign. */
export const sso: Sso = createSso({
  async get(path, signal) {
    const res = await fetch(path, {
      signal,
      credentials: "same-origin",
      cache: "no-store",
      headers: { accept: "application/json" },
    });
    return { status: res.status, body: await res.text() };
  },
  assign: (href) => window.location.assign(href),
  here: () => window.location.pathname + window.location.search,
  now: () => Date.now(),
  storage: () => globalThis.sessionStorage ?? null,
});

export function useSso(): SsoState {
  return useSyncExternalStore(sso.subscribe, sso.getState);
}
