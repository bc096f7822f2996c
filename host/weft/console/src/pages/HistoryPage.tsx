// `/history`: live and archived executions together (ListExecutions with
// include_archived), newest start first, filtered by the URL's query (so a
// filtered view is a link) and paged with the server's cursor: Next sends
// `next_page_token`, Previous goes back through the tokens already used.
// A run opens on the workflow page; an archived one by its uid, exactly.
// While the history is unavailable the page says so instead of a table.
import { Code, ConnectError } from "@connectrpc/connect";
import { useEffect, useState } from "react";
import { admin, errorText, isAbort, type Execution } from "../api";
import { VirtualRows } from "../components/VirtualRows";
import { clearError, reportError } from "../errors";
import {
  currentToken,
  FIRST_PAGE,
  historyRequest,
  isFiltered,
  localToRfc3339,
  nextPage,
  previousPage,
  rfc3339ToLocal,
  WORKFLOW_PHASES,
  type HistoryFilters,
  type PageStack,
} from "../history";
import { navigate, onLinkClick } from "../router";
import { historyHref, workflowHref } from "../routes";
import { elapsed, formatDuration, formatTime } from "../time";
import { PhaseBadge } from "./WorkflowListPage";

const ROW_HEIGHT = 34;
const PAGE_SIZE = 50;

export interface HistoryRow {
  namespace: string;
  name: string;
  uid: string;
  phase: string;
  message: string;
  archived: boolean;
  template: string;
  startedAt: string;
  finishedAt: string;
}

export function toHistoryRow(e: Execution): HistoryRow {
  return {
    namespace: e.id?.namespace ?? "",
    name: e.id?.name ?? "",
    uid: e.uid,
    phase: e.phase,
    message: e.message,
    archived: e.archived,
    template: e.template,
    startedAt: e.startedAt,
    finishedAt: e.finishedAt,
  };
}

/** The workflow page of a row: an archived run by its uid (its name may be in use again). */
export function historyRowHref(r: HistoryRow): string {
  return workflowHref(r.namespace, r.name, [], r.archived ? r.uid : "");
}

type Listing =
  | { state: "loading" }
  | { state: "listed"; rows: HistoryRow[]; next: string }
  | { state: "failed"; unavailable: boolean; text: string };

/** The form's filters, written to the URL after a pause in typing. */
function useDraft(filters: HistoryFilters, key: string) {
  const [draft, setDraft] = useState(filters);
  // The URL changed (back, forward, a link): the form follows it. (`key`
  // is `filters` by value: the route is parsed again on every render.)
  useEffect(() => setDraft(filters), [key]);
  useEffect(() => {
    const href = historyHref(draft);
    if (href === key) return;
    const t = setTimeout(() => navigate(href, { replace: true }), 400);
    return () => clearTimeout(t);
  }, [draft, key]);
  const set = (k: keyof HistoryFilters, v: string) => setDraft((d) => ({ ...d, [k]: v }));
  return { draft, set, setDraft };
}

export function HistoryPage({ filters }: { filters: HistoryFilters }) {
  const key = historyHref(filters);
  const { draft, set, setDraft } = useDraft(filters, key);
  // The pages seen under these filters; other filters start at the first.
  const [paging, setPaging] = useState<{ key: string; pages: PageStack }>({ key, pages: FIRST_PAGE });
  const pages = paging.key === key ? paging.pages : FIRST_PAGE;
  const token = currentToken(pages);
  const [listing, setListing] = useState<Listing>({ state: "loading" });
  const [reload, setReload] = useState(0);
  const [now, setNow] = useState(() => Date.now());

  useEffect(() => {
    const ctl = new AbortController();
    setListing({ state: "loading" });
    admin
      .listExecutions(historyRequest(filters, token, PAGE_SIZE), { signal: ctl.signal })
      .then((res) => {
        if (ctl.signal.aborted) return;
        setListing({ state: "listed", rows: res.executions.map(toHistoryRow), next: res.nextPageToken });
        setNow(Date.now());
        clearError("history");
      })
      .catch((e: unknown) => {
        if (ctl.signal.aborted || isAbort(e)) return;
        const unavailable = e instanceof ConnectError && e.code === Code.Unavailable;
        setListing({ state: "failed", unavailable, text: e instanceof ConnectError ? e.rawMessage || errorText(e) : errorText(e) });
        reportError("history", e, "Listing the history: ");
      });
    return () => ctl.abort();
  }, [key, token, reload]);

  const rows = listing.state === "listed" ? listing.rows : [];
  const open = (r: HistoryRow) => navigate(historyRowHref(r));
  const go = (next: PageStack) => setPaging({ key, pages: next });
  const pageNo = pages.length;

  return (
    <main className="page list-page history-page">
      <div className="toolbar">
        <h1>History</h1>
        <span className="muted" aria-live="polite" data-testid="history-count">
          {listing.state === "loading" && "loading…"}
          {listing.state === "listed" && `${rows.length} execution${rows.length === 1 ? "" : "s"} on page ${pageNo}`}
          {listing.state === "failed" && "not listed"}
        </span>
        <span className="spacer" />
        <button type="button" data-testid="history-refresh" onClick={() => setReload((n) => n + 1)} title="List this page again">
          Refresh
        </button>
      </div>
      <form className="toolbar history-filters" aria-label="Filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Namespace
          <input
            value={draft.namespace}
            placeholder="all namespaces"
            onChange={(e) => set("namespace", e.target.value.trim())}
            data-testid="history-namespace"
          />
        </label>
        <label>
          Phase
          <select value={draft.phase} onChange={(e) => set("phase", e.target.value)} data-testid="history-phase">
            <option value="">any</option>
            {WORKFLOW_PHASES.map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </label>
        <label>
          Name prefix
          <input value={draft.prefix} placeholder="nightly-" onChange={(e) => set("prefix", e.target.value)} data-testid="history-prefix" />
        </label>
        <label className="grow">
          Labels
          <input
            value={draft.selector}
            placeholder="team=ml,env!=dev"
            onChange={(e) => set("selector", e.target.value)}
            data-testid="history-selector"
          />
        </label>
        <label>
          Template
          <input value={draft.template} placeholder="template name" onChange={(e) => set("template", e.target.value)} data-testid="history-template" />
        </label>
        <label title="Started at or after (local time)">
          Started after
          <input
            type="datetime-local"
            step={1}
            value={rfc3339ToLocal(draft.after)}
            onChange={(e) => set("after", localToRfc3339(e.target.value))}
            data-testid="history-after"
          />
        </label>
        <label title="Started before (local time)">
          before
          <input
            type="datetime-local"
            step={1}
            value={rfc3339ToLocal(draft.before)}
            onChange={(e) => set("before", localToRfc3339(e.target.value))}
            data-testid="history-before"
          />
        </label>
        <button
          type="button"
          data-testid="history-clear"
          disabled={!isFiltered(draft)}
          onClick={() => setDraft({ ...draft, phase: "", selector: "", template: "", prefix: "", after: "", before: "" })}
        >
          Clear filters
        </button>
      </form>
      {listing.state === "failed" ? (
        <div className="history-failed" data-testid="history-error" data-unavailable={listing.unavailable}>
          <strong>{listing.unavailable ? "The execution history is unavailable" : "The history could not be listed"}</strong>
          <p>{listing.text}</p>
          <p className="muted">No executions are shown rather than a partial list. Live workflows are still on the Workflows page.</p>
        </div>
      ) : (
        <div className="table wf-table history-table" role="table" aria-label="Execution history" aria-busy={listing.state === "loading"}>
          <div className="thead" role="row">
            <span role="columnheader">Name</span>
            <span role="columnheader">Namespace</span>
            <span role="columnheader">Phase</span>
            <span role="columnheader">Started</span>
            <span role="columnheader">Finished</span>
            <span role="columnheader">Duration</span>
            <span role="columnheader">Kept</span>
          </div>
          {listing.state === "listed" && rows.length === 0 && (
            <p className="empty" data-testid="history-empty">
              {pageNo > 1 ? "No more executions." : "No executions match."}
            </p>
          )}
          <VirtualRows
            className="tbody"
            label="Executions"
            count={rows.length}
            rowHeight={ROW_HEIGHT}
            onOpen={(i) => open(rows[i])}
            row={(i, style) => <HistoryRowView key={rows[i].uid || `${rows[i].namespace}/${rows[i].name}`} r={rows[i]} index={i} now={now} style={style} />}
          />
        </div>
      )}
      <nav className="pager" aria-label="Pages">
        <button type="button" data-testid="history-prev" disabled={pageNo === 1} onClick={() => go(previousPage(pages))}>
          ← Previous page
        </button>
        <span className="muted" data-testid="history-page">
          Page {pageNo}
        </span>
        <button
          type="button"
          data-testid="history-next"
          disabled={listing.state !== "listed" || listing.next === ""}
          onClick={() => listing.state === "listed" && go(nextPage(pages, listing.next))}
        >
          Next page →
        </button>
      </nav>
    </main>
  );
}

function HistoryRowView({ r, index, now, style }: { r: HistoryRow; index: number; now: number; style: React.CSSProperties }) {
  const href = historyRowHref(r);
  return (
    <div
      role="row"
      tabIndex={0}
      className="trow"
      style={style}
      data-index={index}
      data-testid="history-row"
      data-name={r.name}
      data-namespace={r.namespace}
      data-phase={r.phase}
      data-uid={r.uid}
      data-archived={r.archived}
      onClick={(e) => onLinkClick(e, href)}
    >
      <span role="cell" className="cell-name">
        <a
          href={href}
          tabIndex={-1}
          onClick={(e) => {
            e.stopPropagation();
            onLinkClick(e, href);
          }}
          title={r.message || r.name}
        >
          {r.name}
        </a>
      </span>
      <span role="cell">{r.namespace}</span>
      <span role="cell">
        <PhaseBadge phase={r.phase} />
      </span>
      <span role="cell" title={r.startedAt}>
        {formatTime(r.startedAt)}
      </span>
      <span role="cell" title={r.finishedAt}>
        {formatTime(r.finishedAt) || "—"}
      </span>
      <span role="cell">{formatDuration(elapsed(r.startedAt, r.finishedAt, now))}</span>
      <span role="cell">
        {r.archived ? (
          <span className="tag archived" data-testid="archived-marker" title="Its Workflow is gone: kept in the execution history">
            archived
          </span>
        ) : (
          <span className="tag" title="Its Workflow exists">
            live
          </span>
        )}
      </span>
    </div>
  );
}
