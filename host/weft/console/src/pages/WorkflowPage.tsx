// `/workflows/:namespace/:name` (and `/nodes/:node`): one workflow, live,
// or, once its Workflow is gone, as the execution history keeps it
// (`archived`: the same page, without the live-only actions).
import { useCallback, useEffect, useMemo, useState } from "react";
import { admin, type Execution, type NodeExecution } from "../api";
import { JsonBlock } from "../components/Json";
import { clearError, reportError } from "../errors";
import { closesPanel } from "../keys";
import { buildLevel, childrenToWatch, walkLevel, type GraphLevel, type PathSize } from "../graph/nested";
import { nodeSize } from "../graph/sizes";
import { hasChildWorkflow, progress } from "../phases";
import { navigate } from "../router";
import { nodeHref, workflowHref } from "../routes";
import { toggleExpand } from "../graph/nested";
import { elapsed, formatDuration, formatTime } from "../time";
import { DagView, isExpandable } from "./DagView";
import { NodePanel } from "./NodePanel";
import { TimelineView } from "./TimelineView";
import { useChildExecutions } from "./useChildExecutions";
import { useChips, type ChipTarget } from "./useChips";
import { useExecution, type WatchStatus } from "./useExecution";
import { useLayout } from "./useLayout";
import { PhaseBadge } from "./WorkflowListPage";

interface Props {
  namespace: string;
  name: string;
  node: string | null;
  /** Paths of the DAG boxes drawn open (the URL's `expand`). */
  expand: readonly string[];
  /** An archived execution named exactly (the URL's `uid`). */
  uid?: string;
}

// Performance hooks for the browser benchmark: the first DAG paint of the
// page load, then every live update once it is in the DOM.
let dagPaintedMarked = false;
function markApplied(first: boolean): void {
  if (first) {
    if (dagPaintedMarked) return;
    dagPaintedMarked = true;
    // After the frame that shows the committed DOM has been painted.
    requestAnimationFrame(() => setTimeout(() => performance.mark("weft:dag-painted"), 0));
  } else {
    performance.mark("weft:update-applied");
  }
}

const NO_NODES: NodeExecution[] = [];
const EMPTY_LEVEL: GraphLevel<NodeExecution> = { prefix: "", workflow: "", nodes: NO_NODES, groups: new Map() };

/** The expanded, expandable boxes of the levels that are not drawn as groups, by path. */
function openBoxesOf(
  levels: readonly (GraphLevel<NodeExecution> | undefined)[],
  expanded: ReadonlySet<string>,
): Map<string, ChipTarget> {
  const out = new Map<string, ChipTarget>();
  for (const l of levels) {
    if (!l) continue;
    for (const { path, node, level } of walkLevel(l)) {
      if (expanded.has(path) && isExpandable(node) && !level.groups.has(node.id)) out.set(path, { path, workflow: level.workflow, node });
    }
  }
  return out;
}

export function WorkflowPage({ namespace, name, node, expand, uid = "" }: Props) {
  const { exec, status, applyActionResult } = useExecution(namespace, name, uid);
  const archived = exec?.archived ?? false;
  const [view, setView] = useState<"graph" | "timeline">("graph");
  // The route is parsed again on every render: compare the open boxes by
  // value (paths hold no commas: node ids are letters, digits and '-').
  const expandKey = expand.join(",");
  const opened = useMemo(() => (expandKey === "" ? [] : expandKey.split(",")), [expandKey]);
  const expanded = useMemo<ReadonlySet<string>>(() => new Set(opened), [opened]);
  const nodes = exec?.nodes;
  const exitNodes = exec?.exitNodes ?? NO_NODES;
  const allNodes = useMemo(() => [...(nodes ?? []), ...exitNodes], [nodes, exitNodes]);

  // Open sub-workflow nodes draw their child Workflow, followed live.
  const { execs: childExecs, follow } = useChildExecutions(namespace);
  const childNodes = useMemo(() => new Map([...childExecs].map(([n, e]) => [n, e.nodes])), [childExecs]);
  const level = useMemo(
    () => (nodes ? buildLevel(name, nodes, expanded, childNodes) : undefined),
    [name, nodes, expanded, childNodes],
  );
  const exitLevel = useMemo(
    () => (exitNodes.length ? buildLevel(name, exitNodes, expanded, childNodes) : undefined),
    [name, exitNodes, expanded, childNodes],
  );
  const watched = [level, exitLevel].flatMap((l) => (l ? childrenToWatch(l, expanded) : []));
  const watchedKey = watched.join(",");
  useEffect(() => follow(watchedKey === "" ? [] : watchedKey.split(",")), [watchedKey, follow]);

  // Open boxes that are not groups: arrays (their items as chips) and
  // sub-workflows whose child is still loading.
  const openBoxes = useMemo(() => openBoxesOf([level, exitLevel], expanded), [level, exitLevel, expanded]);
  // An archived run's array items are not served (GetNode reads live Workflows).
  const chipTargets = useMemo(
    () => (archived ? [] : [...openBoxes.values()].filter((t) => !hasChildWorkflow(t.node))),
    [openBoxes, archived],
  );
  const chips = useChips(namespace, chipTargets);
  const sizeOf = useCallback<PathSize>(
    (path) => {
      const t = openBoxes.get(path);
      if (!t) return nodeSize(false, 0);
      return nodeSize(true, hasChildWorkflow(t.node) ? 0 : (chips.get(path)?.length ?? (t.node.itemsTotal || 0)));
    },
    [openBoxes, chips],
  );
  const layout = useLayout(level, sizeOf);
  const exitLayout = useLayout(exitLevel, sizeOf);

  const open = useCallback(
    (workflow: string, id: string) =>
      // A node of a child drawn in a group opens on its own Workflow's page.
      navigate(workflow === name ? nodeHref(namespace, name, id, opened, uid) : nodeHref(namespace, workflow, id)),
    [namespace, name, opened, uid],
  );
  const toggle = useCallback(
    (path: string, isOpen?: boolean) => {
      const next = toggleExpand(opened, path, isOpen);
      const href = node ? nodeHref(namespace, name, node, next, uid) : workflowHref(namespace, name, next, uid);
      navigate(href, { replace: true });
    },
    [namespace, name, node, opened, uid],
  );
  const closeHref = workflowHref(namespace, name, opened, uid);

  const live = node ? allNodes.find((n) => n.id === node) : undefined;
  useEscapeCloses(node, closeHref);

  return (
    <main className={`page workflow-page${node ? " with-panel" : ""}`}>
      <WorkflowHeader namespace={namespace} name={name} exec={exec} status={status} onResult={applyActionResult} />
      <div className="workflow-body">
        <div className="workflow-main">
          <div className="view-switch" role="tablist" aria-label="View">
            <button type="button" role="tab" aria-selected={view === "graph"} data-testid="view-graph" onClick={() => setView("graph")}>
              Graph
            </button>
            <button type="button" role="tab" aria-selected={view === "timeline"} data-testid="view-timeline" onClick={() => setView("timeline")}>
              Timeline
            </button>
          </div>
          {exec === null && <p className="muted">Loading workflow…</p>}
          {exec !== null && view === "graph" && (
            <>
              <DagView
                label={`DAG of ${name}`}
                level={level ?? EMPTY_LEVEL}
                layout={layout}
                namespace={namespace}
                selected={node}
                expanded={expanded}
                chips={chips}
                onOpen={open}
                onToggle={toggle}
                onApplied={markApplied}
              />
              {exitNodes.length > 0 && (
                <section className="exit-section" aria-label="Exit handler">
                  <h3>Exit handler</h3>
                  <DagView
                    label="Exit handler nodes"
                    compact
                    level={exitLevel ?? EMPTY_LEVEL}
                    layout={exitLayout}
                    namespace={namespace}
                    selected={node}
                    expanded={expanded}
                    chips={chips}
                    onOpen={open}
                    onToggle={toggle}
                  />
                </section>
              )}
            </>
          )}
          {exec !== null && view === "timeline" && (
            <TimelineView nodes={allNodes} workflowStart={exec.startedAt} selected={node} onOpen={(id) => open(name, id)} />
          )}
          {exec && <WorkflowData exec={exec} />}
        </div>
        {node && (
          <NodePanel
            key={node}
            namespace={namespace}
            name={name}
            nodeId={node}
            live={live}
            closeHref={closeHref}
            onExecution={applyActionResult}
            archived={exec ? exec.archived : null}
            events={exec?.archived ? exec.events : null}
            uid={exec?.archived ? exec.uid : ""}
          />
        )}
      </div>
    </main>
  );
}

/**
 * Escape closes the node panel. Focus that was in the panel (or nowhere)
 * goes back to the node's box or timeline label, so keyboard users carry
 * on where they opened it.
 */
function useEscapeCloses(node: string | null, closeHref: string) {
  useEffect(() => {
    if (!node) return;
    const onKey = (e: globalThis.KeyboardEvent) => {
      const focused = document.activeElement as HTMLElement | null;
      if (!closesPanel(e, focused)) return;
      e.preventDefault();
      const lost = !focused || focused === document.body || focused.closest("[data-testid=node-panel]") !== null;
      if (lost) {
        document
          .querySelector<HTMLElement | SVGElement>(`.workflow-main :is(g[tabindex], button)[data-node="${CSS.escape(node)}"]`)
          ?.focus({ preventScroll: true });
      }
      navigate(closeHref);
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [node, closeHref]);
}

type ActionName = "abort" | "retry" | "resubmit" | "suspend" | "resume" | "stop" | "terminate";

const ACTIONS: { name: ActionName; label: string; title: string; danger?: boolean }[] = [
  { name: "abort", label: "Abort", title: "Abort: stop the running nodes", danger: true },
  { name: "retry", label: "Retry", title: "Run a failed or aborted workflow again from its failed and skipped nodes" },
  { name: "resubmit", label: "Resubmit", title: "Start a new execution with the same spec and inputs" },
  { name: "suspend", label: "Suspend", title: "Start no new node until resumed" },
  { name: "resume", label: "Resume", title: "Let a suspended workflow start nodes again" },
  { name: "stop", label: "Stop", title: "Abort running nodes, then run the exit handler", danger: true },
  { name: "terminate", label: "Terminate", title: "Abort running nodes; no exit handler runs", danger: true },
];

function callAction(action: ActionName, id: { namespace: string; name: string; uid: string }, archived: boolean): Promise<Execution> {
  // An archived run: a new Workflow with its spec and inputs.
  if (archived) return admin.resubmitArchived({ id });
  switch (action) {
    case "abort":
      return admin.abortExecution({ id, reason: "aborted from the Weft console" });
    case "retry":
      return admin.retryExecution({ id });
    case "resubmit":
      return admin.resubmitExecution({ id });
    case "suspend":
      return admin.suspendExecution({ id });
    case "resume":
      return admin.resumeExecution({ id });
    case "stop":
      return admin.stopExecution({ id });
    case "terminate":
      return admin.terminateExecution({ id });
  }
}

function WorkflowHeader({
  namespace,
  name,
  exec,
  status,
  onResult,
}: {
  namespace: string;
  name: string;
  exec: Execution | null;
  status: WatchStatus;
  onResult: (e: Execution) => void;
}) {
  const [busy, setBusy] = useState<ActionName | null>(null);
  const run = async (a: (typeof ACTIONS)[number]) => {
    setBusy(a.name);
    try {
      const res = await callAction(a.name, { namespace, name, uid: exec?.uid ?? "" }, archived);
      clearError("action");
      // Resubmit made a new execution: go to it.
      if (a.name === "resubmit" && res.id && (archived || res.id.name !== name)) navigate(workflowHref(res.id.namespace, res.id.name));
      else onResult(res);
    } catch (e) {
      reportError("action", e, `${a.label} refused: `);
    } finally {
      setBusy(null);
    }
  };
  const p = exec ? progress(exec.nodes) : null;
  const archived = exec?.archived ?? false;
  // What an archived run can do: be run again (the rest acts on a live Workflow).
  const actions = archived ? ACTIONS.filter((a) => a.name === "resubmit") : ACTIONS;
  return (
    <header className="wf-header">
      <div className="wf-title">
        <h1>
          <span className="muted">{namespace}/</span>
          {name}
        </h1>
        <PhaseBadge phase={exec?.phase ?? ""} testid="workflow-phase" />
        {exec?.suspended && <span className="tag">suspended</span>}
        {exec?.shutdown && <span className="tag">{exec.shutdown}</span>}
        {exec?.abortRequested && <span className="tag">abort requested</span>}
        {archived && (
          <span className="tag archived" data-testid="archived-badge" title="Its Workflow is gone: shown from the execution history">
            archived
          </span>
        )}
        <span className={`watch-status ${status.replace(/ /g, "-")}`} title="Live updates">
          {status}
        </span>
      </div>
      {exec?.message && (
        <p className={`wf-message${exec.phase === "Failed" ? " failed" : ""}`} data-testid="workflow-message">
          {exec.message}
        </p>
      )}
      <dl className="facts inline">
        <dt>Started</dt>
        <dd title={exec?.startedAt}>{formatTime(exec?.startedAt ?? "") || "—"}</dd>
        <dt>Duration</dt>
        <dd>{exec ? <Elapsed started={exec.startedAt} finished={exec.finishedAt} /> : "—"}</dd>
        <dt>Progress</dt>
        <dd>{p ? `${p.finished}/${p.total} finished, ${p.failed} failed` : "—"}</dd>
        {exec && exec.retries > 0 && (
          <>
            <dt>Retries</dt>
            <dd>{exec.retries}</dd>
          </>
        )}
        {exec?.template && (
          <>
            <dt>Template</dt>
            <dd>{exec.template}</dd>
          </>
        )}
      </dl>
      <div className="actions" role="toolbar" aria-label="Workflow actions">
        {actions.map((a) => (
          <button
            key={a.name}
            type="button"
            className={a.danger ? "danger" : undefined}
            data-testid={`action-${a.name}`}
            title={a.title}
            disabled={busy !== null}
            onClick={() => run(a)}
          >
            {busy === a.name ? `${a.label}…` : a.label}
          </button>
        ))}
      </div>
    </header>
  );
}

function WorkflowData({ exec }: { exec: Execution }) {
  const labels = Object.entries(exec.labels);
  return (
    <div className="wf-data">
      {labels.length > 0 && (
        <p className="labels">
          {labels.map(([k, v]) => (
            <span key={k} className="tag">
              {k}={v}
            </span>
          ))}
        </p>
      )}
      <details className="section">
        <summary>Inputs</summary>
        <JsonBlock text={exec.inputs} />
      </details>
      <details className="section" open={exec.outputs !== ""}>
        <summary>Outputs</summary>
        <JsonBlock text={exec.outputs} testid="workflow-outputs" />
      </details>
    </div>
  );
}

/** A duration that keeps counting (once a second) while unfinished, without re-rendering the page. */
export function Elapsed({ started, finished }: { started: string; finished: string }) {
  const [now, setNow] = useState(() => Date.now());
  const running = started !== "" && finished === "";
  useEffect(() => {
    if (!running) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [running]);
  return <>{formatDuration(elapsed(started, finished, now)) || "—"}</>;
}
