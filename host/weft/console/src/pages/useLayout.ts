// Layout of a graph (with its open groups), computed in the layout worker
// once per structure (node ids, edges, box sizes, which groups are open)
// and reused while only phases change.
import { useEffect, useMemo, useState } from "react";
import { layoutAsync } from "../graph/layoutClient";
import { nestedInput, nestedKey, type GraphLevel, type NestedLayout, type PathSize } from "../graph/nested";
import { reportError } from "../errors";

export function useLayout(level: GraphLevel | undefined, sizeOf: PathSize): NestedLayout | null {
  const [layout, setLayout] = useState<{ key: string; layout: NestedLayout } | null>(null);
  const input = useMemo(() => (level ? nestedInput(level, sizeOf) : null), [level, sizeOf]);
  const key = useMemo(() => (input ? nestedKey(input) : ""), [input]);

  useEffect(() => {
    if (input === null) return;
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
