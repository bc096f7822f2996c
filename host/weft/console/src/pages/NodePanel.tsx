// The node panel (`/workflows/:ns/:name/nodes/:node`): a side panel on the
// workflow page with the node's record (live, from the watch stream), its
// details from GetNode (child resource, Events, items, spec), its history
// (every attempt's phases) and its pod log. An archived run's panel reads
// the same from the history: GetNode and StreamNodeLogs serve its archived
// copy (the log when it was archived, `archiveLogs`), only its Kubernetes
// Events are gone with the Workflow.
import { useEffect, useLayoutEffect, useRef, useState } from "react";
import {
  admin,
  errorText,
  isAbort,
  isAuthError,
  sleep,
  tokenAfterRefusal,
  type Execution,
  type ExecutionEvent,
  type NodeDetails,
  type NodeExecution,
} from "../api";
import { JsonBlock } from "../components/Json";
import { NodeArtifacts } from "./NodeArtifacts";
import { NodeHistory } from "./NodeHistory";
import { clearError, reportError } from "../errors";
import { isActiveNodePhase, isWaitingGate } from "../phases";
import { Link } from "../router";
import { workflowHref } from "../routes";
import { shortDigest } from "../text";
import { elapsed, formatDuration, formatTime } from "../time";
import { PhaseBadge } from "./WorkflowListPage";

/** The log kept in the page: the newest part of it. */
const MAX_LOG_CHARS = 1_000_000;
const TAIL_LINES = 200;

interface Props {
  namespace: string;
  name: string;
  nodeId: string;
  /** The node as the watch stream last showed it (undefined: not in the execution). */
  live: NodeExecution | undefined;
  closeHref: string;
  onExecution: (e: Execution) => void;
  /**
   * Read from the execution history: its Workflow is gone. null: not known
   * yet (the page has no execution yet), so nothing that reads the live
   * Workflow is asked for.
   */
  archived?: boolean | null;
  /** The execution's history events when the page has them (an archived run's); null: fetched here. */
  events?: readonly ExecutionEvent[] | null;
  /** An archived run's uid: that run exactly, though its name may have been used again. */
  uid?: string;
}

const NOT_KEPT = "(not kept for an archived run)";

/** Which execution: the live Workflow, or (with `uid`) an archived run exactly. */
interface ExecutionRef {
  namespace: string;
  name: string;
  uid: string;
}
const EVENTS_GONE = "(Kubernetes Events go with their Workflow: not kept for an archived run)";

export function NodePanel({ namespace, name, nodeId, live, closeHref, onExecution, archived: known = false, events = null, uid = "" }: Props) {
  const details = useNodeDetails({ namespace, name, uid }, nodeId, live, known !== null);
  const node = live ?? details?.node;
  const archived = known === true;
  const log = useNodeLog({ namespace, name, uid }, nodeId, node, archived);
  const phase = node?.phase ?? "";

  return (
    <aside className="node-panel" data-testid="node-panel" data-node={nodeId} aria-label={`Node ${nodeId}`}>
      <header className="panel-head">
        <h2 title={nodeId}>{nodeId}</h2>
        <Link href={closeHref} className="close" aria-label="Close node panel" aria-keyshortcuts="Escape" title="Close (Esc)">
          ✕
        </Link>
      </header>
      {!node && <p className="muted">Loading node…</p>}
      {node && (
        <>
          <div className="panel-row">
            <PhaseBadge phase={phase} testid="node-phase" />
            {node.reason && <span className="reason">{node.reason}</span>}
            {node.cached && <span className="tag">cached</span>}
          </div>
          {node.message && (
            <div className={`node-message${phase === "Failed" ? " failed" : ""}`} data-testid="node-message" role={phase === "Failed" ? "alert" : undefined}>
              {node.message}
            </div>
          )}
          {!archived && isWaitingGate(node) && <GateButtons namespace={namespace} name={name} nodeId={nodeId} onExecution={onExecution} />}
          <NodeFacts node={node} namespace={namespace} />
          {!archived && <NodeActions namespace={namespace} name={name} nodeId={nodeId} onExecution={onExecution} />}
        </>
      )}
      <NodeHistory namespace={namespace} name={name} nodeId={nodeId} live={live} events={events} fetch={known === false} />
      {details?.resource && (
        <details className="section">
          <summary>Child resource (JSON)</summary>
          <JsonBlock text={details.resource} />
        </details>
      )}
      <section className="section">
        <h3>Events</h3>
        {archived ? (
          <p className="muted" data-testid="node-events">
            {EVENTS_GONE}
          </p>
        ) : (
          <EventsTable details={details} />
        )}
      </section>
      {details && details.items.length > 0 && <ItemsTable details={details} />}
      <details className="section">
        <summary>Inputs / spec</summary>
        <JsonBlock text={details?.spec ?? ""} testid="node-spec" empty={archived ? NOT_KEPT : undefined} />
      </details>
      <section className="section">
        <h3>Outputs</h3>
        <JsonBlock text={node?.outputs ?? ""} testid="node-outputs" empty="(none)" />
      </section>
      <NodeArtifacts namespace={namespace} name={name} nodeId={nodeId} outputs={node?.outputs ?? ""} archived={archived} />
      {node && node.logLinks.length > 0 && (
        <section className="section">
          <h3>Log links</h3>
          <ul className="links">
            {node.logLinks.map((l) => (
              <li key={l.name + l.uri}>
                <a href={l.uri} target="_blank" rel="noopener noreferrer">
                  {l.name || l.uri}
                </a>
              </li>
            ))}
          </ul>
        </section>
      )}
      <section className="section">
        <h3>
          Pod log <span className="muted small">{log.status}</span>
        </h3>
        <LogPre text={log.text} />
      </section>
    </aside>
  );
}

function NodeFacts({ node, namespace }: { node: NodeExecution; namespace: string }) {
  const r = node.resource;
  const digest = node.pluginDigest;
  return (
    <dl className="facts">
      <dt>Kind</dt>
      <dd>{node.kind || "—"}</dd>
      <dt>Attempts</dt>
      <dd>{node.attempts}</dd>
      <dt>Started</dt>
      <dd title={node.startedAt}>{formatTime(node.startedAt) || "—"}</dd>
      <dt>Finished</dt>
      <dd title={node.finishedAt}>{formatTime(node.finishedAt) || "—"}</dd>
      <dt>Duration</dt>
      <dd>{formatDuration(elapsed(node.startedAt, node.finishedAt, Date.now())) || "—"}</dd>
      {node.taskPhase && (
        <>
          <dt>Task phase</dt>
          <dd>{node.taskPhase}</dd>
        </>
      )}
      <dt>Task type</dt>
      <dd>{node.taskType || "—"}</dd>
      <dt>Plugin</dt>
      <dd data-testid="node-plugin" title={digest}>
        {node.plugin || "—"}
        {digest && <code className="digest"> {shortDigest(digest)}</code>}
      </dd>
      {node.itemsTotal > 0 && (
        <>
          <dt>Items</dt>
          <dd>
            {node.itemsSucceeded} succeeded, {node.itemsFailed} failed, {node.itemsRunning} running of {node.itemsTotal}
          </dd>
        </>
      )}
      {r && r.kind && (
        <>
          <dt>Child</dt>
          <dd>
            <code>
              {r.apiVersion}/{r.kind}/
            </code>
            {r.kind === "Workflow" ? <Link href={workflowHref(namespace, r.name)}>{r.name}</Link> : <code>{r.name}</code>}
          </dd>
        </>
      )}
    </dl>
  );
}

function GateButtons({ namespace, name, nodeId, onExecution }: { namespace: string; name: string; nodeId: string; onExecution: (e: Execution) => void }) {
  const [rejecting, setRejecting] = useState(false);
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const id = { namespace, name };
  const run = async (what: string, call: () => Promise<Execution>) => {
    setBusy(true);
    try {
      onExecution(await call());
      clearError("action");
      setRejecting(false);
    } catch (e) {
      reportError("action", e, `${what}: `);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="gate">
      <p>This approval gate is waiting.</p>
      <button type="button" className="primary" data-testid="gate-approve" disabled={busy} onClick={() => run("Approve", () => admin.approveGate({ id, nodeId }))}>
        Approve
      </button>
      <button type="button" className="danger" data-testid="gate-reject" disabled={busy} onClick={() => setRejecting(true)}>
        Reject…
      </button>
      {rejecting && (
        <form
          className="gate-reject"
          onSubmit={(e) => {
            e.preventDefault();
            void run("Reject", () => admin.rejectGate({ id, nodeId, reason }));
          }}
        >
          <input
            data-testid="gate-reject-reason"
            aria-label="Reason for rejecting"
            placeholder="reason"
            autoFocus
            value={reason}
            onChange={(e) => setReason(e.target.value)}
          />
          <button type="submit" className="danger" data-testid="gate-reject-confirm" disabled={busy}>
            Reject
          </button>
          <button type="button" onClick={() => setRejecting(false)}>
            Cancel
          </button>
        </form>
      )}
    </div>
  );
}

function NodeActions({ namespace, name, nodeId, onExecution }: { namespace: string; name: string; nodeId: string; onExecution: (e: Execution) => void }) {
  const [busy, setBusy] = useState(false);
  const retry = async () => {
    setBusy(true);
    try {
      onExecution(await admin.retryExecution({ id: { namespace, name }, nodeId }));
      clearError("action");
    } catch (e) {
      reportError("action", e, "Retry from this node: ");
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="panel-actions">
      <button type="button" data-testid="node-retry" disabled={busy} onClick={retry} title="Retry the workflow, restarting this node and every node after it">
        Retry from here
      </button>
    </div>
  );
}

function EventsTable({ details }: { details: NodeDetails | null }) {
  if (!details) return <p className="muted" data-testid="node-events">loading…</p>;
  if (details.events.length === 0) return <p className="muted" data-testid="node-events">No events.</p>;
  return (
    <table className="events" data-testid="node-events">
      <thead>
        <tr>
          <th>Type</th>
          <th>Reason</th>
          <th>Message</th>
          <th>Count</th>
          <th>Last</th>
        </tr>
      </thead>
      <tbody>
        {details.events.map((ev, i) => (
          <tr key={i} className={ev.type === "Warning" ? "warning" : undefined}>
            <td>{ev.type}</td>
            <td>{ev.reason}</td>
            <td title={ev.object}>{ev.message}</td>
            <td>{ev.count}</td>
            <td title={ev.lastTime}>{formatTime(ev.lastTime)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function ItemsTable({ details }: { details: NodeDetails }) {
  const shown = details.items.slice(0, 500);
  return (
    <details className="section">
      <summary>Items ({details.items.length})</summary>
      <table className="events">
        <thead>
          <tr>
            <th>#</th>
            <th>Phase</th>
            <th>Attempts</th>
            <th>Message</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((it) => (
            <tr key={it.index}>
              <td>{it.index}</td>
              <td>
                <PhaseBadge phase={it.phase} />
              </td>
              <td>{it.attempts}</td>
              <td title={it.outputs}>{it.message}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {details.items.length > shown.length && <p className="muted">and {details.items.length - shown.length} more</p>}
    </details>
  );
}

function LogPre({ text }: { text: string }) {
  const ref = useRef<HTMLPreElement>(null);
  const stick = useRef(true);
  // Follow the end of the log unless the reader scrolled up.
  useLayoutEffect(() => {
    const el = ref.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [text]);
  return (
    <pre
      ref={ref}
      className="log"
      data-testid="node-log"
      tabIndex={0}
      onScroll={(e) => {
        const el = e.currentTarget;
        stick.current = el.scrollTop + el.clientHeight >= el.scrollHeight - 8;
      }}
    >
      {text}
    </pre>
  );
}

/**
 * GetNode for the panel, fetched again when the node's live record changes
 * (at most once a second) and every 5 s while it runs, for new Events.
 */
function useNodeDetails(
  id: ExecutionRef,
  nodeId: string,
  live: NodeExecution | undefined,
  enabled: boolean,
): NodeDetails | null {
  const { namespace, name, uid } = id;
  const [details, setDetails] = useState<NodeDetails | null>(null);
  const sig = live
    ? `${live.phase}|${live.attempts}|${live.message}|${live.itemsSucceeded}|${live.itemsFailed}|${live.itemsRunning}|${live.resource?.name}`
    : "";
  const active = live ? isActiveNodePhase(live.phase) : false;
  const last = useRef(0);

  useEffect(() => setDetails(null), [namespace, name, uid, nodeId]);

  useEffect(() => {
    if (!enabled) return;
    const ctl = new AbortController();
    const fetchOnce = async () => {
      last.current = Date.now();
      try {
        const d = await admin.getNode({ id: { namespace, name, uid }, nodeId }, { signal: ctl.signal });
        if (!ctl.signal.aborted) setDetails(d);
        clearError("node");
      } catch (e) {
        if (!ctl.signal.aborted && !isAbort(e)) reportError("node", e, `Node ${nodeId}: `);
      }
    };
    const wait = Math.max(0, 1000 - (Date.now() - last.current));
    const t = setTimeout(fetchOnce, wait);
    const every = active ? setInterval(fetchOnce, 5000) : undefined;
    return () => {
      ctl.abort();
      clearTimeout(t);
      clearInterval(every);
    };
  }, [namespace, name, uid, nodeId, sig, active, enabled]);
  return details;
}

/**
 * The pod log: the last 200 lines, followed while the node runs. The stream
 * restarts when the node (re)starts an attempt; a follow stream that breaks
 * reconnects with backoff and starts again from the tail.
 */
function useNodeLog(id: ExecutionRef, nodeId: string, node: NodeExecution | undefined, archived: boolean) {
  const { namespace, name, uid } = id;
  const [text, setText] = useState("");
  const [status, setStatus] = useState("");
  const started = node !== undefined && node.phase !== "" && node.phase !== "Pending";
  const startKey = started ? `${node.attempts}` : null;
  const running = node?.phase === "Running";
  const runningRef = useRef(running);
  runningRef.current = running;

  useEffect(() => {
    setText("");
    if (startKey === null) {
      setStatus("(no log before the node starts)");
      return;
    }
    const ctl = new AbortController();
    const signal = ctl.signal;
    let buf = "";
    let raf = 0;
    const flush = () => {
      raf = 0;
      setText(buf);
    };
    const run = async () => {
      let backoff = 1000;
      while (!signal.aborted) {
        // An archived run's log is its archived copy: nothing to follow.
        const follow = runningRef.current && !archived;
        setStatus(follow ? "following" : "loading");
        try {
          buf = "";
          const stream = admin.streamNodeLogs({ id: { namespace, name, uid }, nodeId, follow, tailLines: TAIL_LINES }, { signal });
          for await (const chunk of stream) {
            buf += chunk.text;
            if (buf.length > MAX_LOG_CHARS) buf = buf.slice(buf.length - MAX_LOG_CHARS);
            // Many small chunks: render at most once a frame.
            if (!raf) raf = requestAnimationFrame(flush);
          }
          flush();
          setStatus(follow ? "(ended)" : `(last ${TAIL_LINES} lines)`);
          return;
        } catch (e) {
          if (signal.aborted || isAbort(e)) return;
          if (isAuthError(e)) {
            await tokenAfterRefusal(e, signal);
            continue;
          }
          setStatus(`(no log: ${errorText(e)})`);
          if (!follow || !runningRef.current) return;
        }
        await sleep(backoff, signal);
        backoff = Math.min(backoff * 2, 30000);
      }
    };
    void run();
    return () => {
      ctl.abort();
      if (raf) cancelAnimationFrame(raf);
    };
  }, [namespace, name, uid, nodeId, startKey, archived]);
  return { text, status };
}
