// Layout of a node set, computed in the layout worker once per structure
// (node ids, edges, box sizes) and reused while only phases change.
import { useEffect, useMemo, useState } from "react";
import type { NodeExecution } from "../api";
import { layoutAsync } from "../graph/layoutClient";
import { layoutInput, structureKey } from "../graph/model";
import { nodeSize } from "../graph/sizes";
import type { Layout } from "../graph/types";
import { reportError } from "../errors";

export function useLayout(
  nodes: readonly NodeExecution[] | undefined,
  expanded: ReadonlySet<string>,
  chipCount: (n: NodeExecution) => number,
): Layout | null {
  const [layout, setLayout] = useState<{ key: string; layout: Layout } | null>(null);
  const byId = useMemo(() => new Map((nodes ?? []).map((n) => [n.id, n])), [nodes]);
  const input = useMemo(
    () =>
      layoutInput(nodes ?? [], (id) => {
        const n = byId.get(id)!;
        return nodeSize(expanded.has(id), chipCount(n));
      }),
    [nodes, byId, expanded, chipCount],
  );
  const key = useMemo(() => structureKey(input), [input]);

  useEffect(() => {
    if (nodes === undefined) return;
    if (layout?.key === key) return;
    let stale = false;
    layoutAsync(input).then(
      (l) => {
        if (!stale) setLayout({ key, layout: l });
      },
      (e) => reportError("layout", e, "Laying out the graph: "),
    );
    return () => {
      stale = true;
    };
    // `input` changes with every update; `key` says when the layout must.
  }, [key]);

  return layout?.layout ?? null;
}
