// The child Workflows of the open sub-workflow groups, each followed live
// through its own WatchExecution stream exactly as the page's workflow is
// (the same middleware chain and token). `follow(names)` starts a stream
// for each new name and cuts those no longer named; a child that ended
// keeps its last state while its group is open. Updates are applied at
// most once per animation frame.
import { useCallback, useEffect, useRef, useState } from "react";
import type { Execution } from "../api";
import { clearError } from "../errors";
import { watch } from "./useExecution";

const NONE: ReadonlyMap<string, Execution> = new Map();

export function useChildExecutions(namespace: string): {
  execs: ReadonlyMap<string, Execution>;
  follow: (names: readonly string[]) => void;
} {
  const [execs, setExecs] = useState<ReadonlyMap<string, Execution>>(NONE);
  const streams = useRef(new Map<string, AbortController>());
  const pending = useRef(new Map<string, Execution>());
  const frame = useRef(0);

  const flush = useCallback(() => {
    frame.current = 0;
    const batch = pending.current;
    pending.current = new Map();
    setExecs((m) => {
      const next = new Map(m);
      for (const [n, e] of batch) if (streams.current.has(n)) next.set(n, e);
      return next;
    });
  }, []);

  const follow = useCallback(
    (names: readonly string[]) => {
      const want = new Set(names);
      const running = streams.current;
      for (const [name, ctl] of running) {
        if (want.has(name)) continue;
        ctl.abort();
        running.delete(name);
        pending.current.delete(name);
        clearError(`watch:${name}`);
      }
      setExecs((m) => ([...m.keys()].every((n) => want.has(n)) ? m : new Map([...m].filter(([n]) => want.has(n)))));
      for (const name of want) {
        if (running.has(name)) continue;
        const ctl = new AbortController();
        running.set(name, ctl);
        const onExec = (e: Execution) => {
          if (ctl.signal.aborted) return;
          pending.current.set(name, e);
          if (!frame.current) frame.current = requestAnimationFrame(flush);
        };
        void watch({ namespace, name }, ctl.signal, onExec, () => undefined, `watch:${name}`);
      }
    },
    [namespace, flush],
  );

  useEffect(
    () => () => {
      for (const [name, ctl] of streams.current) {
        ctl.abort();
        clearError(`watch:${name}`);
      }
      streams.current.clear();
      if (frame.current) cancelAnimationFrame(frame.current);
      frame.current = 0;
    },
    [],
  );

  return { execs, follow };
}
