// The bearer token and the token prompt. When the host's auth-token
// middleware is on, calls without a valid token fail with Unauthenticated
// (or PermissionDenied); the console then asks for a token, keeps it in
// sessionStorage only (gone when the tab closes) and retries.
import { useSyncExternalStore } from "react";

const TOKEN_KEY = "weft.token";

export interface AuthState {
  /** The prompt is showing because a call was refused. */
  required: boolean;
  /** The server's words for the refusal, shown in the prompt. */
  reason: string;
  hasToken: boolean;
}

let state: AuthState = { required: false, reason: "", hasToken: readToken() !== null };
const listeners = new Set<() => void>();
let waiters: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];


function readToken(): string | null {
  try {
    return globalThis.sessionStorage?.getItem(TOKEN_KEY) ?? null;
  } catch {
    return null;
  }
}

function set(next: Partial<AuthState>): void {
  state = { ...state, ...next };
  for (const l of listeners) l();
}

export function getToken(): string | null {
  return readToken();
}

/** Called when a call was refused: shows the prompt (once, however many calls failed). */
export function noteAuthFailure(reason: string): void {
  if (!state.required || state.reason !== reason) set({ required: true, reason });
}

/** Shows the prompt and resolves once a token was entered (rejects only when `signal` aborts). */
export function waitForToken(signal?: AbortSignal): Promise<void> {
  if (!state.required) set({ required: true });
  return new Promise((resolve, reject) => {
    const w = { resolve, reject };
    waiters.push(w);
    signal?.addEventListener("abort", () => {
      waiters = waiters.filter((x) => x !== w);
      reject(new Error("aborted"));
    });
  });
}

export function submitToken(token: string): void {
  try {
    sessionStorage.setItem(TOKEN_KEY, token.trim());
  } catch {
    // Storage disabled: the token cannot be kept; calls will ask again.
  }
  set({ required: false, reason: "", hasToken: true });
  const ws = waiters;
  waiters = [];
  for (const w of ws) w.resolve();
}

export function forgetToken(): void {
  try {
    sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // nothing kept
  }
  set({ hasToken: false });
}

function subscribe(l: () => void): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

export function useAuth(): AuthState {
  return useSyncExternalStore(subscribe, () => state);
}
