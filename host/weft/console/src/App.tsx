// The shell: top bar, error banner, token or sign-in prompt and the page
// for the URL.
import { useEffect, useState } from "react";
import { forgetToken, useAuth } from "./auth";
import { clearAllErrors, reportError } from "./errors";
import { ErrorBanner, SignInPrompt, TokenPrompt } from "./components/Banner";
import { defaultNamespace, listed, useNamespaces } from "./namespaces";
import { groupsTitle, LOGOUT_HREF, sso, useSso } from "./sso";
import { HistoryPage } from "./pages/HistoryPage";
import { LocksPage } from "./pages/LocksPage";
import { PluginsPage } from "./pages/PluginsPage";
import { WorkflowListPage } from "./pages/WorkflowListPage";
import { WorkflowPage } from "./pages/WorkflowPage";
import { Link, useRoute } from "./router";
import { HISTORY_HREF, listHref, locksHref, PLUGINS_HREF, type Route } from "./routes";
import { applyTheme, type Theme } from "./theme";

function TopBar({ route }: { route: Route }) {
  const auth = useAuth();
  const signOn = useSso();
  // The first namespace the caller may list ("default" when allowed or unknown).
  const home = defaultNamespace(listed(useNamespaces()));
  const [theme, setTheme] = useState<Theme>(() => (document.documentElement.dataset.theme as Theme) ?? "light");
  const toggle = () => {
    const next = theme === "dark" ? "light" : "dark";
    applyTheme(next, true);
    setTheme(next);
  };
  const onWorkflows = route.page === "list" || route.page === "workflow";
  return (
    <header className="topbar">
      <Link href={listHref(home, "")} className="brand">
        Weft
      </Link>
      <nav aria-label="Main">
        <Link href={listHref(home, "")} aria-current={onWorkflows ? "page" : undefined}>
          Workflows
        </Link>
        <Link href={HISTORY_HREF} aria-current={route.page === "history" ? "page" : undefined}>
          History
        </Link>
        <Link href={PLUGINS_HREF} aria-current={route.page === "plugins" ? "page" : undefined}>
          Plugins
        </Link>
        <Link href={locksHref(home)} aria-current={route.page === "locks" ? "page" : undefined}>
          Locks
        </Link>
      </nav>
      <span className="spacer" />
      {signOn.mode === "sso" && signOn.me && (
        <>
          <span className="user" data-testid="user" title={groupsTitle(signOn.me.groups)}>
            {signOn.me.user}
          </span>
          {/* A full-page navigation: the server clears the cookie and goes through the provider's logout. */}
          <a className="button-link" href={LOGOUT_HREF} data-testid="sign-out" onClick={sso.noteSigningOut}>
            Sign out
          </a>
        </>
      )}
      {signOn.mode !== "sso" && auth.hasToken && (
        <button type="button" data-testid="forget-token" onClick={forgetToken} title="Remove the token from this tab">
          Forget token
        </button>
      )}
      <button
        type="button"
        data-testid="theme-toggle"
        onClick={toggle}
        aria-label={`Switch to ${theme === "dark" ? "light" : "dark"} theme`}
        title="Toggle theme"
      >
        {theme === "dark" ? "☀ Light" : "☾ Dark"}
      </button>
    </header>
  );
}

function Page({ route }: { route: Route }) {
  switch (route.page) {
    case "list":
      return <WorkflowListPage namespace={route.namespace} selector={route.selector} />;
    case "workflow":
      return (
        <WorkflowPage
          key={`${route.namespace}/${route.name}/${route.uid ?? ""}`}
          namespace={route.namespace}
          name={route.name}
          node={route.node}
          expand={route.expand}
          uid={route.uid}
        />
      );
    case "history":
      return <HistoryPage filters={route.filters} />;
    case "plugins":
      return <PluginsPage />;
    case "locks":
      return <LocksPage namespace={route.namespace} />;
    case "notfound":
      return (
        <main className="page">
          <h1>Not found</h1>
          <p>
            No page at <code>{route.path}</code>. <Link href="/">Workflows</Link>
          </p>
        </main>
      );
  }
}

export function App() {
  const route = useRoute();
  const pageKey = route.page === "workflow" ? `${route.namespace}/${route.name}/${route.uid ?? ""}` : route.page;
  // Errors belong to the page that raised them.
  useEffect(() => clearAllErrors(), [pageKey]);
  // Single sign-on: /auth/config, then who is signed in (or off to sign in).
  useEffect(() => {
    void sso.start().then((problem) => {
      if (problem) reportError("sign-in", new Error(problem), "Checking the sign-in: ");
    });
  }, []);
  return (
    <div className="app">
      <TopBar route={route} />
      <ErrorBanner />
      <TokenPrompt />
      <SignInPrompt />
      <Page route={route} />
    </div>
  );
}
