// The live execution of the workflow page: WatchExecution's stream, with
// updates applied at most once per animation frame (a busy workflow can
// send many per second; only the newest matters), reconnecting with
// backoff when the stream breaks and stopping once the workflow ended.
import { useCallback, useEffect, useRef, useState } from "react";
import { admin, isAbort, isAuthError, sleep, tokenAfterRefusal, type Execution } from "../api";
import { clearError, reportError } from "../errors";
import { isTerminalWorkflowPhase } from "../phases";

export type WatchStatus = "connecting" | "live" | "reconnecting" | "ended" | "waiting for token";

export function useExecution(namespace: string, name: string) {
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
    void watch({ namespace, name }, ctl.signal, push, setStatus);
    return () => {
      ctl.abort();
      if (frame.current) cancelAnimationFrame(frame.current);
      frame.current = 0;
    };
  }, [namespace, name, generation, push]);

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

/**
 * Follows one Workflow's WatchExecution stream until it ends or `signal`
 * aborts. `source` names the banner slot its errors take.
 */
export async function watch(
  id: { namespace: string; name: string },
  signal: AbortSignal,
  onExec: (e: Execution) => void,
  setStatus: (s: WatchStatus) => void,
  source = "watch",
): Promise<void> {
  let backoff = 1000;
  let last: Execution | null = null;
  while (!signal.aborted) {
    try {
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
      reportError(source, e, `Watching ${id.name}: `);
    }
    setStatus("reconnecting");
    await sleep(backoff, signal);
    backoff = Math.min(backoff * 2, 30000);
  }
}
