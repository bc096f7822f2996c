// What expanded array boxes show: the node's items (GetNode of the
// Workflow the node belongs to: the page's, or a child drawn in a group).
// Fetched when a box is expanded and again when its live record changes,
// at most once a second. (Expanded sub-workflow nodes draw their child's
// graph instead: see useChildExecutions.)
import { useEffect, useRef, useState } from "react";
import { admin, isAbort, type NodeExecution } from "../api";
import { clearError, reportError } from "../errors";
import type { Chip } from "./DagView";

/** An expanded array box: its path in the drawn graph, its Workflow and its record. */
export interface ChipTarget {
  path: string;
  workflow: string;
  node: NodeExecution;
}

async function fetchChips(namespace: string, t: ChipTarget, signal: AbortSignal): Promise<Chip[]> {
  const d = await admin.getNode({ id: { namespace, name: t.workflow }, nodeId: t.node.id }, { signal });
  return d.items.map((it) => ({
    key: String(it.index),
    phase: it.phase,
    title: `item ${it.index}: ${it.phase || "Pending"}${it.attempts > 1 ? ` (${it.attempts} attempts)` : ""}${it.message ? ` — ${it.message}` : ""}`,
  }));
}

function liveSig(t: ChipTarget): string {
  const n = t.node;
  return `${t.path}:${n.phase}:${n.itemsSucceeded}:${n.itemsFailed}:${n.itemsRunning}`;
}

/** Chips by path, for the expanded array boxes in `targets`. */
export function useChips(namespace: string, targets: readonly ChipTarget[]): ReadonlyMap<string, readonly Chip[]> {
  const [chips, setChips] = useState<ReadonlyMap<string, readonly Chip[]>>(new Map());
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
        for (const t of latest.current) {
          try {
            next.set(t.path, await fetchChips(namespace, t, c.signal));
            clearError("chips");
          } catch (e) {
            if (c.signal.aborted || isAbort(e)) return;
            reportError("chips", e, `Expanding ${t.path}: `);
          }
        }
        if (!c.signal.aborted) setChips(next);
      },
      Math.max(0, 1000 - (Date.now() - lastRun.current)),
    );
  }, [sig, namespace]);

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
  const open = new Set(targets.map((t) => t.path));
  for (const [k, v] of chips) if (open.has(k)) shown.set(k, v);
  return shown.size === chips.size ? chips : shown;
}
