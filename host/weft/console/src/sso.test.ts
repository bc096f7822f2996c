// Single sign-on: /auth/config and /auth/me handling, the redirect-loop
// guard and the flow with a fake browser (sso.ts's createSso).
import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { SignInDialog } from "./components/Banner";
import {
  createSso,
  decideSignIn,
  groupsTitle,
  loginHref,
  LOOP_WINDOW_MS,
  modeOf,
  parseConfig,
  parseMe,
  type SsoEnv,
} from "./sso";

const SSO_CONFIG = JSON.stringify({ issuer: "https://idp.example.com", cliClientId: "weft-cli", scopes: ["openid", "email", "groups"] });
const ALICE = JSON.stringify({ user: "alice@example.com", groups: ["team-a", "team-b"], expires: 1767000000 });

describe("/auth/config", () => {
  it("turns single sign-on on only for an issuer", () => {
    const on = parseConfig(200, SSO_CONFIG);
    expect(on).toEqual({ issuer: "https://idp.example.com", cliClientId: "weft-cli", scopes: ["openid", "email", "groups"] });
    expect(modeOf(on)).toBe("sso");
    const off = parseConfig(200, JSON.stringify({ issuer: null, cliClientId: null, scopes: [] }));
    expect(off).toEqual({ issuer: null, cliClientId: null, scopes: [] });
    expect(modeOf(off)).toBe("token");
  });
  it("takes an older server's answer (index.html, 404) for no single sign-on", () => {
    expect(parseConfig(200, "<!doctype html><html><body><div id=root></div></body></html>")).toBeNull();
    expect(parseConfig(404, "single sign-on is not configured")).toBeNull();
    expect(parseConfig(200, JSON.stringify({ something: "else" }))).toBeNull();
    expect(modeOf(null)).toBe("token");
  });
});

describe("/auth/me", () => {
  it("reads the user, groups and expiry", () => {
    expect(parseMe(200, ALICE)).toEqual({
      state: "signed-in",
      me: { user: "alice@example.com", groups: ["team-a", "team-b"], expires: 1767000000 },
    });
    // No groups claim, no expiry: still signed in.
    expect(parseMe(200, JSON.stringify({ user: "bob", groups: null, expires: null }))).toEqual({
      state: "signed-in",
      me: { user: "bob", groups: [], expires: null },
    });
  });
  it("tells a missing session (401) from a failure to check it", () => {
    expect(parseMe(401, "invalid ID token: it has expired\n")).toEqual({ state: "signed-out", reason: "invalid ID token: it has expired" });
    expect(parseMe(401, "")).toEqual({ state: "signed-out", reason: "not signed in" });
    expect(parseMe(502, "the identity provider is unreachable")).toEqual({
      state: "unknown",
      reason: "/auth/me answered 502: the identity provider is unreachable",
    });
    expect(parseMe(200, "<!doctype html>")).toMatchObject({ state: "unknown" });
  });
  it("titles the user with the groups", () => {
    expect(groupsTitle(["team-a", "team-b"])).toBe("team-a, team-b");
    expect(groupsTitle([])).toBe("no groups");
  });
});

describe("the sign-in link", () => {
  it("comes back to the path and query", () => {
    expect(loginHref("/workflows/team-a/wf-1/nodes/approve?expand=inner")).toBe(
      "/auth/login?next=%2Fworkflows%2Fteam-a%2Fwf-1%2Fnodes%2Fapprove%3Fexpand%3Dinner",
    );
    expect(loginHref("/")).toBe("/auth/login?next=%2F");
  });
  it("never names another site", () => {
    expect(loginHref("//evil.example.com/x")).toBe("/auth/login?next=%2F");
    expect(loginHref("https://evil.example.com/")).toBe("/auth/login?next=%2F");
    expect(loginHref("")).toBe("/auth/login?next=%2F");
  });
});

describe("the redirect-loop guard", () => {
  const now = 1_000_000_000;
  const fresh = { now, lastRedirect: null, redirectedThisLoad: false, signedOut: false };
  it("goes to the provider by itself the first time", () => {
    expect(decideSignIn(fresh)).toBe("redirect");
    expect(decideSignIn({ ...fresh, lastRedirect: now - LOOP_WINDOW_MS })).toBe("redirect");
  });
  it("goes once per page load", () => {
    expect(decideSignIn({ ...fresh, redirectedThisLoad: true })).toBe("prompt");
  });
  it("does not go again soon after the last time (coming straight back is a loop)", () => {
    expect(decideSignIn({ ...fresh, lastRedirect: now - 2000 })).toBe("prompt");
    expect(decideSignIn({ ...fresh, lastRedirect: now - LOOP_WINDOW_MS + 1 })).toBe("prompt");
    // The clock went back: as recent.
    expect(decideSignIn({ ...fresh, lastRedirect: now + 5000 })).toBe("prompt");
  });
  it("does not go without storage to remember it, nor after signing out", () => {
    expect(decideSignIn({ ...fresh, lastRedirect: undefined })).toBe("prompt");
    expect(decideSignIn({ ...fresh, signedOut: true })).toBe("prompt");
  });
});

/** A fake browser: answers by path, a sessionStorage shared between "page loads", a clock. */
function browser(answers: Record<string, { status: number; body: string } | "hang" | "network">) {
  const stored = new Map<string, string>();
  const b = {
    now: 1_700_000_000_000,
    here: "/workflows/team-a/wf-1?expand=inner",
    assigned: [] as string[],
    asked: [] as string[],
    stored,
    storageWorks: true,
    /** A new page load: a new instance over the same storage. */
    load(configTimeoutMs = 1000) {
      const env: SsoEnv = {
        get(path, signal) {
          b.asked.push(path);
          const a = answers[path];
          if (a === "network") return Promise.reject(new TypeError("Failed to fetch"));
          if (a === "hang" || a === undefined) {
            return new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error("aborted"))));
          }
          return Promise.resolve(a);
        },
        assign: (href) => b.assigned.push(href),
        here: () => b.here,
        now: () => b.now,
        storage: () =>
          b.storageWorks
            ? {
                getItem: (k: string) => stored.get(k) ?? null,
                setItem: (k: string, v: string) => void stored.set(k, v),
                removeItem: (k: string) => void stored.delete(k),
              }
            : null,
        configTimeoutMs,
      };
      return createSso(env);
    },
  };
  return b;
}

describe("the sign-in flow", () => {
  it("shows who is signed in and stays on the page", async () => {
    const b = browser({ "/auth/config": { status: 200, body: SSO_CONFIG }, "/auth/me": { status: 200, body: ALICE } });
    const s = b.load();
    expect(await s.start()).toBeNull();
    expect(b.asked).toEqual(["/auth/config", "/auth/me"]);
    expect(s.getState()).toMatchObject({ mode: "sso", issuer: "https://idp.example.com", signIn: null });
    expect(s.getState().me).toEqual({ user: "alice@example.com", groups: ["team-a", "team-b"], expires: 1767000000 });
    expect(b.assigned).toEqual([]);
    // Asked once, however often started.
    await s.start();
    await s.authMode();
    expect(b.asked).toEqual(["/auth/config", "/auth/me"]);
  });

  it("without an issuer asks nothing more and never leaves the page", async () => {
    const b = browser({ "/auth/config": { status: 200, body: JSON.stringify({ issuer: null, cliClientId: null, scopes: [] }) } });
    const s = b.load();
    expect(await s.start()).toBeNull();
    expect(s.currentMode()).toBe("token");
    expect(b.asked).toEqual(["/auth/config"]);
    s.signInRequired("invalid token");
    expect(b.assigned).toEqual([]);
    expect(s.getState().signIn).toBeNull();
  });

  it("goes on without single sign-on when /auth/config is index.html, unreachable or too slow", async () => {
    for (const answer of [{ status: 200, body: "<!doctype html>" }, "network", "hang"] as const) {
      const b = browser({ "/auth/config": answer });
      const s = b.load(20);
      expect(await s.authMode()).toBe("token");
      expect(await s.start()).toBeNull();
      expect(b.assigned).toEqual([]);
    }
  });

  it("sends a browser without a session to the provider, coming back here", async () => {
    const b = browser({ "/auth/config": { status: 200, body: SSO_CONFIG }, "/auth/me": { status: 401, body: "not signed in" } });
    const s = b.load();
    await s.start();
    expect(b.assigned).toEqual(["/auth/login?next=%2Fworkflows%2Fteam-a%2Fwf-1%3Fexpand%3Dinner"]);
    expect(s.getState().signIn).toEqual({ phase: "redirecting", reason: "not signed in", signedOut: false });
    // Calls refused meanwhile do not send it twice.
    s.signInRequired("invalid ID token: it has expired; sign in to the console again");
    expect(b.assigned).toHaveLength(1);
  });

  it("cuts a loop: coming back still without a session shows the Sign in button", async () => {
    const answers = { "/auth/config": { status: 200, body: SSO_CONFIG }, "/auth/me": { status: 401, body: "not signed in" } };
    const b = browser(answers);
    await b.load().start();
    expect(b.assigned).toHaveLength(1);
    // Back from the provider a few seconds later, and still 401 (say the cookie was dropped).
    b.now += 3000;
    const again = b.load();
    await again.start();
    expect(b.assigned).toHaveLength(1);
    expect(again.getState().signIn).toEqual({ phase: "prompt", reason: "not signed in", signedOut: false });
    // The button goes, and counts as the last trip.
    again.signInNow();
    expect(b.assigned).toEqual([b.assigned[0], b.assigned[0]]);
    expect(again.getState().signIn?.phase).toBe("redirecting");
    // Long after, an expired session goes by itself again.
    b.now += LOOP_WINDOW_MS + 1;
    const later = b.load();
    await later.start();
    expect(b.assigned).toHaveLength(3);
  });

  it("signs in again by itself when a call finds the session expired", async () => {
    const b = browser({ "/auth/config": { status: 200, body: SSO_CONFIG }, "/auth/me": { status: 200, body: ALICE } });
    const s = b.load();
    await s.start();
    b.now += 3_600_000;
    b.here = "/locks?namespace=team-a";
    s.signInRequired("invalid ID token: it has expired; sign in to the console again");
    expect(b.assigned).toEqual(["/auth/login?next=%2Flocks%3Fnamespace%3Dteam-a"]);
    expect(s.getState().me).toBeNull();
  });

  it("does not sign in by itself after Sign out, until Sign in is pressed", async () => {
    const answers = { "/auth/config": { status: 200, body: SSO_CONFIG }, "/auth/me": { status: 200, body: ALICE } };
    const b = browser(answers);
    const s = b.load();
    await s.start();
    s.noteSigningOut();
    // Back from the provider's logout page at /.
    answers["/auth/me"] = { status: 401, body: "not signed in" };
    b.now += LOOP_WINDOW_MS * 10;
    b.here = "/";
    const out = b.load();
    await out.start();
    expect(b.assigned).toEqual([]);
    expect(out.getState().signIn).toEqual({ phase: "prompt", reason: "not signed in", signedOut: true });
    out.signInRequired("invalid ID token");
    expect(b.assigned).toEqual([]);
    out.signInNow();
    expect(b.assigned).toEqual(["/auth/login?next=%2F"]);
    // Signed in: the next page load would go by itself again.
    answers["/auth/me"] = { status: 200, body: ALICE };
    await b.load().start();
    b.now += LOOP_WINDOW_MS * 10;
    const expired = b.load();
    await expired.start();
    expired.signInRequired("expired");
    expect(b.assigned).toHaveLength(2);
  });

  it("never goes by itself without sessionStorage", async () => {
    const b = browser({ "/auth/config": { status: 200, body: SSO_CONFIG }, "/auth/me": { status: 401, body: "not signed in" } });
    b.storageWorks = false;
    const s = b.load();
    await s.start();
    expect(b.assigned).toEqual([]);
    expect(s.getState().signIn?.phase).toBe("prompt");
  });

  it("reports a failed check of the session without leaving the page", async () => {
    const b = browser({ "/auth/config": { status: 200, body: SSO_CONFIG }, "/auth/me": { status: 503, body: "the provider is unreachable" } });
    const s = b.load();
    expect(await s.start()).toBe("/auth/me answered 503: the provider is unreachable");
    expect(b.assigned).toEqual([]);
    expect(s.getState()).toMatchObject({ mode: "sso", me: null, signIn: null });
  });
});

describe("the sign-in dialog", () => {
  const render = (phase: "redirecting" | "prompt", signedOut = false) =>
    renderToStaticMarkup(
      createElement(SignInDialog, {
        signIn: { phase, reason: "not signed in", signedOut },
        issuer: "https://idp.example.com",
        onSignIn: () => undefined,
      }),
    );
  it("has the Sign in button only when the browser does not go by itself", () => {
    const prompt = render("prompt");
    expect(prompt).toContain('data-testid="sign-in"');
    expect(prompt).toContain("Not signed in: not signed in");
    const going = render("redirecting");
    expect(going).toContain('data-testid="signing-in"');
    expect(going).not.toContain('data-testid="sign-in"');
    expect(render("prompt", true)).toContain("You signed out");
  });
});
