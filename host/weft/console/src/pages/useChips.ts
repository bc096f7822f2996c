// What expanded boxes show: an array node's items (GetNode) or a child
// workflow's nodes (GetExecution). Fetched when a box is expanded and again
// when its live record changes, at most once a second.
import { useEffect, useRef, useState } from "react";
import { admin, isAbort, type NodeExecution } from "../api";
import { clearError, reportError } from "../errors";
import { hasChildWorkflow } from "../phases";
import type { Chip } from "./DagView";

async function fetchChips(namespace: string, name: string, n: NodeExecution, signal: AbortSignal): Promise<Chip[]> {
  if (hasChildWorkflow(n)) {
    const child = await admin.getExecution({ id: { namespace, name: n.resource!.name } }, { signal });
    return child.nodes.map((c) => ({ key: c.id, phase: c.phase, title: `${c.id}: ${c.phase || "Pending"}${c.message ? ` — ${c.message}` : ""}` }));
  }
  const d = await admin.getNode({ id: { namespace, name }, nodeId: n.id }, { signal });
  return d.items.map((it) => ({
    key: String(it.index),
    phase: it.phase,
    title: `item ${it.index}: ${it.phase || "Pending"}${it.attempts > 1 ? ` (${it.attempts} attempts)` : ""}${it.message ? ` — ${it.message}` : ""}`,
  }));
}

function liveSig(n: NodeExecution): string {
  return `${n.id}:${n.phase}:${n.itemsSucceeded}:${n.itemsFailed}:${n.itemsRunning}:${n.resource?.name ?? ""}`;
}

export function useChips(
  namespace: string,
  name: string,
  nodes: readonly NodeExecution[] | undefined,
  expanded: ReadonlySet<string>,
): ReadonlyMap<string, readonly Chip[]> {
  const [chips, setChips] = useState<ReadonlyMap<string, readonly Chip[]>>(new Map());
  const targets = (nodes ?? []).filter((n) => expanded.has(n.id));
  const sig = targets.map(liveSig).join("|");
  const latest = useRef(targets);
  latest.current = targets;
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const lastRun = useRef(0);
  const ctl = useRef<AbortController | null>(null);

  useEffect(() => {
    // Throttle, not debounce: under a steady stream of updates the chips
    // still refresh every second.
    if (timer.current || sig === "") return;
    timer.current = setTimeout(
      async () => {
        timer.current = null;
        lastRun.current = Date.now();
        ctl.current?.abort();
        const c = new AbortController();
        ctl.current = c;
        const next = new Map<string, readonly Chip[]>();
        for (const n of latest.current) {
          try {
            next.set(n.id, await fetchChips(namespace, name, n, c.signal));
            clearError("chips");
          } catch (e) {
            if (c.signal.aborted || isAbort(e)) return;
            reportError("chips", e, `Expanding ${n.id}: `);
          }
        }
        if (!c.signal.aborted) setChips(next);
      },
      Math.max(0, 1000 - (Date.now() - lastRun.current)),
    );
  }, [sig, namespace, name]);

  useEffect(
    () => () => {
      if (timer.current) clearTimeout(timer.current);
      timer.current = null;
      ctl.current?.abort();
    },
    [],
  );

  // Collapsed boxes drop their chips at once (the fetch above is for expanded ones).
  const shown = new Map<string, readonly Chip[]>();
  for (const [k, v] of chips) if (expanded.has(k)) shown.set(k, v);
  return shown.size === chips.size ? chips : shown;
}
