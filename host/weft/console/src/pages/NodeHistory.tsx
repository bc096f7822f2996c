// A node's history in its panel: every phase the node and its task
// attempts entered, as the execution history recorded them (GetExecution's
// `events`). An archived run's come with the page; a live run's are
// fetched here, a second after the node's record changes (the exporter
// writes them just after the status) and every 5 s while it runs.
import { useEffect, useMemo, useState } from "react";
import { admin, errorText, isAbort, type ExecutionEvent, type NodeExecution } from "../api";
import { nodeEvents } from "../history";
import { isActiveNodePhase } from "../phases";
import { formatTime } from "../time";
import { PhaseBadge } from "./WorkflowListPage";

interface Props {
  namespace: string;
  name: string;
  nodeId: string;
  live: NodeExecution | undefined;
  /** The execution's events when the page has them (an archived run's). */
  events: readonly ExecutionEvent[] | null;
  /** Fetch them here (a live run without `events`). */
  fetch: boolean;
}

export function NodeHistory({ namespace, name, nodeId, live, events, fetch }: Props) {
  const fetched = useLiveEvents(namespace, name, live, events === null && fetch);
  const all = events ?? fetched.events;
  const mine = useMemo(() => (all ? nodeEvents(all, nodeId) : null), [all, nodeId]);
  return (
    <section className="section">
      <h3>History</h3>
      {mine === null && (
        <p className="muted" data-testid="node-history">
          {fetched.error ? `(history: ${fetched.error})` : "loading…"}
        </p>
      )}
      {mine !== null && mine.length === 0 && (
        <p className="muted" data-testid="node-history">
          No history events{fetched.error ? ` (history: ${fetched.error})` : ""}.
        </p>
      )}
      {mine !== null && mine.length > 0 && (
        <table className="events" data-testid="node-history">
          <thead>
            <tr>
              <th>Attempt</th>
              <th>Phase</th>
              <th>Of</th>
              <th>At</th>
              <th>Message</th>
            </tr>
          </thead>
          <tbody>
            {mine.map((e, i) => (
              <tr key={i} data-testid="node-history-event" data-kind={e.kind} data-attempt={e.attempt} data-phase={e.phase}>
                <td className="num">{e.attempt}</td>
                <td>
                  <PhaseBadge phase={e.phase} />
                </td>
                <td title={e.kind === "task" ? [e.plugin, e.resource].filter(Boolean).join(" · ") : undefined}>{e.kind}</td>
                <td title={e.at}>{formatTime(e.at)}</td>
                <td>
                  {e.reason && <span className="reason">{e.reason}</span>}
                  {e.reason && e.message && " "}
                  {e.message}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** A live run's events (all nodes'), or the reason they are not there. */
function useLiveEvents(namespace: string, name: string, live: NodeExecution | undefined, enabled: boolean) {
  const [events, setEvents] = useState<readonly ExecutionEvent[] | null>(null);
  const [error, setError] = useState("");
  const sig = live ? `${live.phase}|${live.attempts}|${live.taskPhase}` : "";
  const active = live ? isActiveNodePhase(live.phase) : false;

  useEffect(() => {
    setEvents(null);
    setError("");
  }, [namespace, name]);

  useEffect(() => {
    if (!enabled) return;
    const ctl = new AbortController();
    const fetchOnce = async () => {
      try {
        const e = await admin.getExecution({ id: { namespace, name } }, { signal: ctl.signal });
        if (ctl.signal.aborted) return;
        setEvents(e.events);
        setError("");
      } catch (e) {
        // The panel's other parts report the API's errors; this one is an extra.
        if (!ctl.signal.aborted && !isAbort(e)) setError(errorText(e));
      }
    };
    const t = setTimeout(fetchOnce, 1000);
    const every = active ? setInterval(fetchOnce, 5000) : undefined;
    return () => {
      ctl.abort();
      clearTimeout(t);
      clearInterval(every);
    };
  }, [namespace, name, sig, active, enabled]);
  return { events, error };
}
