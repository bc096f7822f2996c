// The live execution of the workflow page: WatchExecution's stream, with
// updates applied at most once per animation frame (a busy workflow can
// send many per second; only the newest matters), reconnecting with
// backoff when the stream breaks and stopping once the workflow ended.
// A run whose Workflow is gone (deleted by its TTL, say) is shown from the
// execution history (GetExecution answers its archived copy), unwatched.
import { Code, ConnectError } from "@connectrpc/connect";
import { useCallback, useEffect, useRef, useState } from "react";
import { admin, isAbort, isAuthError, sleep, tokenAfterRefusal, type Execution } from "../api";
import { clearError, reportError } from "../errors";
import { isTerminalWorkflowPhase } from "../phases";

/** "archived": read from the execution history; nothing more will change. */
export type WatchStatus = "connecting" | "live" | "reconnecting" | "ended" | "archived" | "waiting for token";

/** `uid`: that archived execution exactly (the history page's links); "" for the live one. */
export function useExecution(namespace: string, name: string, uid = "") {
  const [exec, setExec] = useState<Execution | null>(null);
  const [status, setStatus] = useState<WatchStatus>("connecting");
  // Bumped to restart the watch (after an action revived an ended workflow).
  const [generation, setGeneration] = useState(0);
  const pending = useRef<Execution | null>(null);
  const frame = useRef(0);

  const push = useCallback((e: Execution) => {
    pending.current = e;
    if (frame.current) return;
    frame.current = requestAnimationFrame(() => {
      frame.current = 0;
      const p = pending.current;
      pending.current = null;
      if (p) setExec(p);
    });
  }, []);

  useEffect(() => {
    const ctl = new AbortController();
    void watch({ namespace, name, uid }, ctl.signal, push, setStatus);
    return () => {
      ctl.abort();
      if (frame.current) cancelAnimationFrame(frame.current);
      frame.current = 0;
    };
  }, [namespace, name, uid, generation, push]);

  /** Applies an Execution an action returned, and watches again if the stream had ended. */
  const applyActionResult = useCallback(
    (e: Execution) => {
      push(e);
      if (!isTerminalWorkflowPhase(e.phase)) setGeneration((g) => g + 1);
    },
    [push],
  );

  return { exec, status, applyActionResult };
}

function isNotFound(e: unknown): boolean {
  return e instanceof ConnectError && e.code === Code.NotFound;
}

/**
 * Follows one Workflow's WatchExecution stream until it ends or `signal`
 * aborts. `source` names the banner slot its errors take. When the
 * Workflow is not found, its archived copy (GetExecution) is shown and the
 * watch ends; with `id.uid` that archived execution is read and nothing
 * is watched.
 */
export async function watch(
  id: { namespace: string; name: string; uid?: string },
  signal: AbortSignal,
  onExec: (e: Execution) => void,
  setStatus: (s: WatchStatus) => void,
  source = "watch",
): Promise<void> {
  let backoff = 1000;
  let last: Execution | null = null;
  const exact = (id.uid ?? "") !== "";
  while (!signal.aborted) {
    try {
      if (exact) {
        const e = await admin.getExecution({ id }, { signal });
        onExec(e);
        clearError(source);
        setStatus(e.archived ? "archived" : "ended");
        return;
      }
      for await (const e of admin.watchExecution({ id }, { signal })) {
        last = e;
        onExec(e);
        setStatus("live");
        clearError(source);
        backoff = 1000;
      }
      // The server closes the stream when the workflow ended.
      if (last && isTerminalWorkflowPhase(last.phase)) {
        setStatus("ended");
        return;
      }
    } catch (e) {
      if (signal.aborted || isAbort(e)) return;
      if (isAuthError(e)) {
        setStatus("waiting for token");
        await tokenAfterRefusal(e, signal);
        continue;
      }
      if (!exact && isNotFound(e)) {
        const copy = await archivedCopy(id, signal, source);
        if (copy) {
          onExec(copy);
          clearError(source);
          setStatus("archived");
          return;
        }
        if (signal.aborted) return;
      } else {
        reportError(source, e, `${exact ? "Loading" : "Watching"} ${id.name}: `);
      }
    }
    setStatus("reconnecting");
    await sleep(backoff, signal);
    backoff = Math.min(backoff * 2, 30000);
  }
}

/**
 * The archived copy of a Workflow that is not found; null when there is a
 * live one again (the caller watches it) or the history has none (the
 * error is shown: NOT_FOUND, or UNAVAILABLE while the history is down).
 */
async function archivedCopy(
  id: { namespace: string; name: string },
  signal: AbortSignal,
  source: string,
): Promise<Execution | null> {
  try {
    const e = await admin.getExecution({ id: { namespace: id.namespace, name: id.name } }, { signal });
    return e.archived ? e : null;
  } catch (e) {
    // A refused call already waited for a token (the interceptor) and failed again.
    if (!signal.aborted && !isAbort(e)) reportError(source, e, `Loading ${id.name}: `);
    return null;
  }
}
