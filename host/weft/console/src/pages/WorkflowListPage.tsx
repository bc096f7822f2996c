// `/`: the executions of a namespace (or all), filtered by a label
// selector, re-listed every 2 s. Rows are virtualised. The namespace is
// picked among those the caller may list (ListNamespaces; `/` without
// `?namespace=` opens the first of them when "default" is not one), or
// typed where the server cannot list them.
import { useEffect, useState } from "react";
import { admin, poll, type Execution } from "../api";
import { NamespacePicker } from "../components/NamespacePicker";
import { VirtualRows } from "../components/VirtualRows";
import { clearError, reportError } from "../errors";
import { listed, useNamespaces, useResolvedNamespace } from "../namespaces";
import { phaseColor, phaseTextColor, progress } from "../phases";
import { navigate, onLinkClick } from "../router";
import { listHref, workflowHref } from "../routes";
import { elapsed, formatDuration, formatTime } from "../time";

const ROW_HEIGHT = 34;
const REFRESH_MS = 2000;
const PAGE_SIZE = 500;
/** Stop paging there: more would not be read by anyone and costs the server. */
const MAX_ROWS = 10000;

/** One row's worth of an Execution: computed once per listing, not per render. */
export interface Row {
  namespace: string;
  name: string;
  phase: string;
  message: string;
  finished: number;
  succeeded: number;
  failed: number;
  total: number;
  startedAt: string;
  finishedAt: string;
  /** The lock it waits for (`semaphore/fifty`), else "". */
  waitingFor: string;
  /** The workflow-level locks it holds. */
  holding: string[];
}

export function toRow(e: Execution): Row {
  const p = progress(e.nodes);
  return {
    namespace: e.id?.namespace ?? "",
    name: e.id?.name ?? "",
    phase: e.phase,
    message: e.message,
    finished: p.finished,
    succeeded: p.succeeded,
    failed: p.failed,
    total: p.total,
    startedAt: e.startedAt,
    finishedAt: e.finishedAt,
    waitingFor: e.waitingFor,
    holding: e.holding,
  };
}

async function listAll(namespace: string, labelSelector: string, signal: AbortSignal): Promise<Row[]> {
  const rows: Row[] = [];
  let pageToken = "";
  do {
    const res = await admin.listExecutions({ namespace, labelSelector, limit: PAGE_SIZE, pageToken }, { signal });
    for (const e of res.executions) rows.push(toRow(e));
    pageToken = res.nextPageToken;
  } while (pageToken !== "" && rows.length < MAX_ROWS);
  return rows;
}

/** Edits the filters in the URL after a pause in typing, so the URL is the deep link. */
function useDebouncedUrl(namespace: string, selector: string) {
  const [ns, setNs] = useState(namespace);
  const [sel, setSel] = useState(selector);
  useEffect(() => {
    setNs(namespace);
    setSel(selector);
  }, [namespace, selector]);
  useEffect(() => {
    if (ns === namespace && sel === selector) return;
    const t = setTimeout(() => navigate(listHref(ns, sel), { replace: true }), 400);
    return () => clearTimeout(t);
  }, [ns, sel, namespace, selector]);
  return { ns, setNs, sel, setSel };
}

export function WorkflowListPage({ namespace, selector }: { namespace: string; selector: string }) {
  const [rows, setRows] = useState<Row[] | null>(null);
  const [now, setNow] = useState(() => Date.now());
  const f = useDebouncedUrl(namespace, selector);
  const namespaces = useNamespaces();
  // null: waiting for the list to know what "default" stands for.
  const shown = useResolvedNamespace(namespace, namespaces);

  useEffect(() => {
    if (shown !== null && shown !== namespace) navigate(listHref(shown, selector), { replace: true });
  }, [shown, namespace, selector]);

  useEffect(() => {
    setRows(null);
    if (shown === null) return;
    const ctl = new AbortController();
    void poll(
      REFRESH_MS,
      ctl.signal,
      async (signal) => {
        const r = await listAll(shown, selector, signal);
        if (signal.aborted) return;
        setRows(r);
        setNow(Date.now());
        clearError("list");
      },
      (e) => reportError("list", e, "Listing workflows: "),
    );
    return () => ctl.abort();
  }, [shown, selector]);

  const open = (r: Row) => navigate(workflowHref(r.namespace, r.name));

  return (
    <main className="page list-page">
      <div className="toolbar">
        <h1>Workflows</h1>
        {namespaces.state === "failed" ? (
          <label>
            Namespace
            <input
              value={f.ns}
              placeholder="all namespaces"
              onChange={(e) => f.setNs(e.target.value.trim())}
              data-testid="namespace-filter"
            />
          </label>
        ) : (
          <NamespacePicker
            value={shown ?? namespace}
            namespaces={listed(namespaces)}
            emptyLabel="all namespaces"
            onChange={(ns) => {
              f.setNs(ns);
              navigate(listHref(ns, f.sel));
            }}
          />
        )}
        <label className="grow">
          Labels
          <input
            value={f.sel}
            placeholder="team=ml,env!=dev"
            onChange={(e) => f.setSel(e.target.value)}
            data-testid="selector-filter"
          />
        </label>
        <span className="muted" aria-live="polite">
          {rows === null ? "loading…" : `${rows.length} workflow${rows.length === 1 ? "" : "s"}`}
        </span>
      </div>
      <div className="table wf-table" role="table" aria-label="Workflows">
        <div className="thead" role="row">
          <span role="columnheader">Name</span>
          <span role="columnheader">Namespace</span>
          <span role="columnheader">Phase</span>
          <span role="columnheader">Lock</span>
          <span role="columnheader">Progress</span>
          <span role="columnheader">Started</span>
          <span role="columnheader">Duration</span>
        </div>
        {rows !== null && rows.length === 0 && <p className="empty">No workflows.</p>}
        <VirtualRows
          className="tbody"
          label="Workflows"
          count={rows?.length ?? 0}
          rowHeight={ROW_HEIGHT}
          onOpen={(i) => rows && open(rows[i])}
          row={(i, style) => rows && <WorkflowRow key={`${rows[i].namespace}/${rows[i].name}`} r={rows[i]} index={i} now={now} style={style} />}
        />
      </div>
    </main>
  );
}

function WorkflowRow({ r, index, now, style }: { r: Row; index: number; now: number; style: React.CSSProperties }) {
  const href = workflowHref(r.namespace, r.name);
  const pct = r.total === 0 ? 0 : (100 * r.finished) / r.total;
  return (
    <div
      role="row"
      tabIndex={0}
      className="trow"
      style={style}
      data-index={index}
      data-testid="workflow-row"
      data-name={r.name}
      data-namespace={r.namespace}
      data-phase={r.phase}
      onClick={(e) => onLinkClick(e, href)}
    >
      <span role="cell" className="cell-name">
        <a href={href} tabIndex={-1} onClick={(e) => {
            e.stopPropagation();
            onLinkClick(e, href);
          }} title={r.message || r.name}>
          {r.name}
        </a>
      </span>
      <span role="cell">{r.namespace}</span>
      <span role="cell">
        <PhaseBadge phase={r.phase} />
      </span>
      <LockCell r={r} />
      <span role="cell" title={`${r.finished} finished of ${r.total}: ${r.succeeded} succeeded, ${r.failed} failed`}>
        <span className="progress">
          <span className={`progress-bar${r.failed > 0 ? " has-failed" : ""}`} style={{ width: `${pct}%` }} />
        </span>
        {r.finished}/{r.total}
      </span>
      <span role="cell" title={r.startedAt}>
        {formatTime(r.startedAt)}
      </span>
      <span role="cell">{formatDuration(elapsed(r.startedAt, r.finishedAt, now))}</span>
    </div>
  );
}

/** What the row's workflow waits for or holds; its message says where it is in line. */
export function LockCell({ r }: { r: Row }) {
  const [text, title] = lockText(r);
  return (
    <span role="cell" className={r.waitingFor ? "lock-wait" : undefined} title={title} data-testid="workflow-lock">
      {text}
    </span>
  );
}

/** The lock cell's text and tooltip. */
export function lockText(r: Pick<Row, "waitingFor" | "holding" | "message">): [string, string] {
  if (r.waitingFor) return [`waits for ${r.waitingFor}`, r.message || r.waitingFor];
  if (r.holding.length === 0) return ["", ""];
  const more = r.holding.length > 1 ? ` +${r.holding.length - 1}` : "";
  return [`holds ${r.holding[0]}${more}`, r.holding.join(", ")];
}

export function PhaseBadge({ phase, testid }: { phase: string; testid?: string }) {
  const shown = phase || "Pending";
  return (
    <span
      className="badge"
      data-testid={testid}
      style={{ background: phaseColor(shown), color: phaseTextColor(shown) }}
    >
      {shown}
    </span>
  );
}
