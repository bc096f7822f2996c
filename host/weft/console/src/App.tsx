// The shell: top bar, error banner, token prompt and the page for the URL.
import { useEffect, useState } from "react";
import { forgetToken, useAuth } from "./auth";
import { clearAllErrors } from "./errors";
import { ErrorBanner, TokenPrompt } from "./components/Banner";
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
  const [theme, setTheme] = useState<Theme>(() => (document.documentElement.dataset.theme as Theme) ?? "light");
  const toggle = () => {
    const next = theme === "dark" ? "light" : "dark";
    applyTheme(next, true);
    setTheme(next);
  };
  const onWorkflows = route.page === "list" || route.page === "workflow";
  return (
    <header className="topbar">
      <Link href="/" className="brand">
        Weft
      </Link>
      <nav aria-label="Main">
        <Link href={listHref("default", "")} aria-current={onWorkflows ? "page" : undefined}>
          Workflows
        </Link>
        <Link href={HISTORY_HREF} aria-current={route.page === "history" ? "page" : undefined}>
          History
        </Link>
        <Link href={PLUGINS_HREF} aria-current={route.page === "plugins" ? "page" : undefined}>
          Plugins
        </Link>
        <Link href={locksHref("default")} aria-current={route.page === "locks" ? "page" : undefined}>
          Locks
        </Link>
      </nav>
      <span className="spacer" />
      {auth.hasToken && (
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
  return (
    <div className="app">
      <TopBar route={route} />
      <ErrorBanner />
      <TokenPrompt />
      <Page route={route} />
    </div>
  );
}
